"""Burst smoothing: a minute holding more than its channel carries (at the rate in
force, ``NudgeConfig.planning_rate``) moves the excess into the nearest earlier minutes
with room, at most ``NUDGE_MAX_EARLY_MINUTES`` earlier, never later (an early nudge
says "in 14 min"; a late one is the product failing). Only rows still at their
intended instant move, and the instant (the queue's key) never changes.
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
    """Moves that bring every minute within ``capacity`` where earlier room allows,
    into minutes from ``first_open`` on, nearest room first."""
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
    # The current and next minutes may already be being claimed.
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
