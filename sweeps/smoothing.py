"""Burst smoothing: see the top of the hour coming and spread it, earlier only.

Most meetings start on the hour, so most nudges fall due in the same minute.
The queue knows three hours ahead how many nudges each minute holds per
channel; where a minute holds more than its channel carries in a minute
(planning rate x the run's sending seconds x headroom), the excess is moved
into the nearest earlier minutes with room, at most
``NUDGE_MAX_EARLY_MINUTES`` earlier — never later, since
a late nudge is the product failing and an early one just says "in 14 min"
(the text is composed at send time). Only rows still at their intended
instant move, the heaviest users' extra nudges first; a row placed once
stays placed, so running this again reshuffles nothing. The intended
instant, and so the queue's unique key, never changes.

The planning rate is not the configured one (``NudgeConfig.planning_rate``):
the adaptive pacer (``pacing/pacer.py``) holds a channel configured at its
provider's limit to a sawtooth under it, averaging ``(1 + backoff) / 2`` of
the setting, and lower still after 429s found a lower limit — which the plan
reads from the shared rate in force, so a minute is filled only with what the
channel will really carry. The last minute of a burst has no later minute to
spill into on time; planning at the configured rate left its tail a few
seconds past the +1 minute edge (BENCHMARKS.md, issue 20).

The plan (:func:`plan_moves`) is plain arithmetic over minute counts; the
moves are queue transitions in ``transitions.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.config import NudgeConfig
from pacing.pacer import channel_rates_in_force
from scheduled_sends.queue import transitions

MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class Move:
    minute: datetime  # the over-full minute
    to: datetime  # the earlier minute with room
    count: int

    @property
    def by(self) -> timedelta:
        return self.minute - self.to


def plan_moves(
    load: Mapping[datetime, int], capacity: int, first_open: datetime, max_early: timedelta
) -> list[Move]:
    """Moves that bring every minute within ``capacity`` where earlier room allows.

    ``load`` counts movable and placed rows per minute; rows may move only
    into minutes from ``first_open`` on (never into a minute already being
    delivered). Minutes are visited oldest first and fill the nearest earlier
    room first, so nudges move as little as they can.
    """
    load = dict(load)
    moves = []
    for minute in sorted(load):
        excess = load[minute] - capacity
        steps = 1
        while excess > 0 and steps * MINUTE <= max_early:
            target = minute - steps * MINUTE
            steps += 1
            if target < first_open:
                break
            room = capacity - load.get(target, 0)
            if room <= 0:
                continue
            count = min(room, excess)
            moves.append(Move(minute, target, count))
            load[target] = load.get(target, 0) + count
            load[minute] -= count
            excess -= count
    return moves


def smooth_bursts(now: datetime, config: NudgeConfig) -> int:
    """Spread over-full minutes of the look-ahead earlier; how many nudges moved."""
    if config.max_early <= timedelta(0):
        return 0
    # The minute after next is the first a move may land in: the current and
    # next minutes may already be being claimed.
    first_open = now.replace(second=0, microsecond=0) + 2 * MINUTE
    loads = transitions.load_per_minute(first_open - MINUTE, now + config.lookahead)
    if not loads:
        return 0
    in_force = channel_rates_in_force(config)
    moved = 0
    for channel, load in loads.items():
        capacity = config.per_minute_capacity(channel, in_force.get(channel))
        if capacity is None:
            continue
        for move in plan_moves(load, capacity, first_open, config.max_early):
            moved += transitions.smooth_minute(channel, move.minute, move.count, move.by)
    return moved
