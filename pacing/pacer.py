"""Pacing: named rate budgets that hold across every process at once, and learn from 429s
(docs/ARCHITECTURE.md, "Pacing"). A lost reservation (commits do not wait for the disk)
only lets a slot be used twice.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TypeVar

from django.db import connection

from core.config import NudgeConfig
from core.executor import Executor
from pacing import statements
from tenancy.scope import unscoped_relaxed

# How far ahead one reservation of send slots may reach.
HORIZON = timedelta(seconds=1)
# A fresh slot starts this far from now: time to stamp the row and hand it to a worker.
LEAD = timedelta(milliseconds=100)
# A slot reached later than this (or one slot interval, if longer) is not used.
LATE_TOLERANCE = 0.25
# A 429 never lowers a budget's rate below this many requests a second: an
# absolute minimum, whatever the ceiling, so any provider's limit can be learned.
MIN_RATE = 0.05
# What was sent and refused is counted with this time constant (seconds): long
# enough to hold a few round trips, short enough to follow a pause.
COUNTING_SECONDS = 2.0
# Fewer slots than this sent lately say nothing of what the provider accepts.
ACCEPTED_SAMPLE = 10
# What the provider accepted replaces the rate in force only when under this
# share of it: nearer, the counting window (its pauses) understates the limit.
ACCEPTED_JUMP = 0.5
# A 429 lowers the rate at most once within this long (or the pause, if longer):
# the requests in flight when the limit was hit answer 429 together.
MIN_HOLD = timedelta(seconds=1)


@dataclass(frozen=True)
class Budget:
    """A named rate shared by every process: ``ceiling`` per second, 0 = unpaced; ``burst``
    requests may go at once after a quiet spell (a token bucket, only at the full ceiling)."""

    name: str
    ceiling: float
    burst: int = 0


@dataclass(frozen=True)
class Grant:
    """Slots reserved in one budget: ``count`` from ``first`` (monotonic), ``rate`` apart;
    a burst's slots in the past all open at ``earliest``."""

    first: float
    count: int
    rate: float
    earliest: float

    @property
    def opens_at(self) -> float:
        """When the first slot may be used."""
        return max(self.first, self.earliest)

    def deadlines(self) -> list[float]:
        return [max(self.earliest, self.first + i / self.rate) for i in range(self.count)]


@dataclass(frozen=True)
class BudgetState:
    """A budget as the console and the run log show it."""

    budget: str
    ceiling: float
    rate: float
    paused_for: float  # seconds until its next free slot, 0 when free now

    @property
    def lowered(self) -> bool:
        return self.rate < self.ceiling * 0.999

    @property
    def app_wide(self) -> bool:
        """A channel's or provider's own budget, not one user's (``provider:kind:id``)."""
        return ":" not in self.budget


T = TypeVar("T")


def _params(config: NudgeConfig) -> dict[str, float]:
    return {
        "growth": math.log1p(config.pacing_recovery_per_minute) / 60,
        "tau": COUNTING_SECONDS,
    }


# Budgets whose rows this process has seen. A statement on any other first creates its
# row in the same round trip: a first sync meets a new per-user budget at every account.
_seen_budgets: set[str] = set()
SEEN_BUDGETS_KEPT = 100_000  # forgetting costs one statement's row check, not a wrong answer
_CREATE_ROWS = (statements.ENSURE_PACING_ROWS,)


def _with_rows(names: Sequence[str], run: Callable[[Sequence[str]], T]) -> T:
    """``run(first)``, ``first`` creating the budgets' rows unless this process has seen
    them; once more with it when it answered nothing (a row rolled back since: the
    statements then touch none)."""
    seen = _seen_budgets.issuperset(names)
    answer = run(() if seen else _CREATE_ROWS)
    if not answer and seen:
        answer = run(_CREATE_ROWS)
    if answer:
        if len(_seen_budgets) > SEEN_BUDGETS_KEPT:  # a long-lived process meets every account
            _seen_budgets.clear()
        _seen_budgets.update(names)
    return answer


def reserve_slots(
    config: NudgeConfig,
    budgets: Sequence[Budget],
    wanted: int,
    *,
    horizon: timedelta = HORIZON,
    lead: timedelta = LEAD,
) -> dict[str, Grant]:
    """Up to ``wanted`` slots in each budget, between ``lead`` and ``horizon`` from now;
    from any thread (each has its own connection)."""
    names = [b.name for b in budgets]
    params = {
        "budgets": names,
        "ceilings": [float(b.ceiling) for b in budgets],
        "bursts": [int(b.burst) for b in budgets],
        "wanted": wanted,
        "horizon": horizon,
        "lead": lead,
        **_params(config),
    }

    def reserve(first: Sequence[str]) -> dict[str, Grant]:
        # Taken before the statement: a slow commit must not shift the mapping.
        asked_at = time.monotonic()
        rows = unscoped_relaxed(statements.RESERVE_SLOTS, params, first=first)
        earliest = asked_at + lead.total_seconds()
        return {
            name: Grant(asked_at + (first_slot - db_now).total_seconds(), slots, rate, earliest)
            for name, first_slot, slots, rate, db_now in rows
        }

    return _with_rows(names, reserve)


def slow_down(config: NudgeConfig, budget: Budget, seconds: float) -> float:
    """A 429: nobody uses ``budget`` for ``seconds``, and its rate drops (once per
    pause); the rate in force after it."""
    params = {
        "budget": budget.name,
        "budgets": [budget.name],
        "ceiling": float(budget.ceiling),
        "wait": timedelta(seconds=seconds),
        "hold": max(MIN_HOLD, timedelta(seconds=seconds)),
        "minimum": MIN_RATE,
        "sample": ACCEPTED_SAMPLE,
        "guess": ACCEPTED_JUMP,
        "backoff": config.pacing_backoff,
        **_params(config),
    }

    def slow(first: Sequence[str]) -> list[tuple]:
        return unscoped_relaxed(statements.SLOW_DOWN, params, first=first)

    rows = _with_rows([budget.name], slow)
    return float(rows[0][0]) if rows else budget.ceiling


def rates_in_force(config: NudgeConfig) -> list[BudgetState]:
    """Budgets in use with their rate in force now, as every process sees them (per-user
    ones only when lowered or paused)."""
    with connection.cursor() as cursor:
        cursor.execute(statements.RATES_IN_FORCE, _params(config))
        return [BudgetState(*row) for row in cursor.fetchall()]


def channel_rates_in_force(config: NudgeConfig) -> dict[str, float]:
    """Each paced channel's rate in force now (a channel never paced yet is absent)."""
    paced = {channel for channel, rate in config.channel_rates.items() if rate > 0}
    return {s.budget: s.rate for s in rates_in_force(config) if s.budget in paced}


_process_lock = threading.Lock()

# budget name -> monotonic instant this process last heard a 429 in it (any thread).
_limited_at: dict[str, float] = {}

# The one thread (and database session) the request statements go through, while
# ``one_connection`` blocks are open; how many are.
_lane: Executor | None = None
_lane_holders = 0


@contextmanager
def one_connection() -> Iterator[None]:
    """Within the block, every thread's request pacing shares one database session of
    this process (a hundred fetches in flight ask the server for one); blocks may nest."""
    global _lane, _lane_holders
    with _process_lock:
        if _lane is None:
            _lane = Executor(1, "pacing")  # inline in a transaction it does not own
        _lane_holders += 1
    try:
        yield
    finally:
        with _process_lock:
            _lane_holders -= 1
            lane, closing = _lane, _lane_holders == 0
            if closing:
                _lane = None
        if closing and lane is not None:
            lane.close()


def _statement(call: Callable[[], T]) -> T:
    lane = _lane
    return call() if lane is None else lane.submit(call).result()


def wait_for_request_slot(budgets: Sequence[Budget], max_wait: float, config: NudgeConfig) -> bool:
    """For one request: wait (holding no transaction) until its slot opens in every
    budget; False at once when one has no slot within ``max_wait`` seconds. A 429 heard
    while waiting sends the thread back for a fresh slot (an unused one is lost)."""
    paced = [b for b in budgets if b.ceiling > 0]
    give_up_at = time.monotonic() + max_wait
    while paced:
        asked = time.monotonic()
        horizon = min(HORIZON.total_seconds(), max(0.0, give_up_at - asked))
        # No lead: the fetching thread is already there to use the slot.
        reserve = partial(
            reserve_slots, config, paced, 1, horizon=timedelta(seconds=horizon), lead=timedelta(0)
        )
        grants = _statement(reserve)
        opens_at = max(grant.opens_at for grant in grants.values())
        if opens_at > give_up_at:
            return False
        if any(grant.count < 1 for grant in grants.values()):
            # Taken or paused until ``opens_at``: ask again just before it.
            time.sleep(max(0.01, opens_at - time.monotonic() - HORIZON.total_seconds() / 2))
            continue
        delay = opens_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with _process_lock:
            limited = any(_limited_at.get(b.name, 0.0) > asked for b in paced)
        if not limited:
            return True
    return True


def request_rate_limited(budget: Budget, seconds: float, config: NudgeConfig) -> float:
    """A provider's 429 for a request paced in ``budget``; the rate in force after it."""
    if budget.ceiling <= 0:
        return 0.0
    with _process_lock:
        _limited_at[budget.name] = time.monotonic()
    return _statement(partial(slow_down, config, budget, seconds))


class ChannelPacer:
    """This process's view of the shared per-channel send budgets, and their pauses."""

    def __init__(self, config: NudgeConfig) -> None:
        self.config = config
        self._lock = threading.Lock()  # the turns, the chats' locks
        # channel -> monotonic instant of this process's next send turn on it
        self._next_turn_at: dict[str, float] = {}
        # channel -> monotonic instant before which asking again is pointless
        self._ask_again_at: dict[str, float] = {}
        # channel -> monotonic instant a 429 paused it until (read by worker threads)
        self._paused_until: dict[str, float] = {}
        # channel -> the rate in force as this process last saw it: its own spacing (take_turn)
        self.rates: dict[str, float] = {}
        self._chat_free_at: dict[tuple[str, str], float] = {}
        # (channel, address) -> the chat's send lock, and when its last send was answered
        self._chat_locks: dict[tuple[str, str], threading.Lock] = {}
        self._chat_answered_at: dict[tuple[str, str], float] = {}

    def take_turn(self, channel: str, deadline: float) -> bool:
        """Wait for this process's next turn on ``channel`` (its sends at least one interval
        of the rate in force apart, from any thread) and take it; False, at once and without
        using a turn, when that turn comes too late for ``deadline``: its time belongs to
        other processes' slots, and a used turn would push every row after it late too."""
        with self._lock:
            rate = self.rates.get(channel) or self.config.rate(channel)
            if rate <= 0:
                return True
            now = time.monotonic()
            turn = max(now, self._next_turn_at.get(channel, 0.0))
            if turn - deadline > max(LATE_TOLERANCE, 1 / rate):
                return False
            self._next_turn_at[channel] = turn + 1 / rate
        if turn > now:
            time.sleep(turn - now)
        return True

    def reserve(self, channel: str, wanted: int) -> list[float]:
        """Up to ``wanted`` send deadlines (monotonic seconds), earliest first; "now" when
        unpaced, none when taken or paused for ``HORIZON``."""
        now = time.monotonic()
        if wanted <= 0:
            return []
        budget = Budget(channel, self.config.rate(channel))
        if budget.ceiling <= 0:
            return [now] * wanted if self.resume_at(channel) <= now else []
        if max(self._ask_again_at.get(channel, 0.0), self.resume_at(channel)) > now:
            return []
        grant = reserve_slots(self.config, [budget], wanted)[channel]
        self.rates[channel] = grant.rate
        if grant.count < wanted:
            # Taken up to ``first + count/rate``; ask once that is within reach.
            free_at = grant.first + grant.count / grant.rate
            self._ask_again_at[channel] = free_at - HORIZON.total_seconds() / 2
        return grant.deadlines()

    def pause(self, channel: str, seconds: float) -> None:
        """The provider said 429: no process sends on ``channel`` for ``seconds``,
        and the channel's rate in force drops for every process."""
        self._paused_until[channel] = max(self.resume_at(channel), time.monotonic() + seconds)
        budget = Budget(channel, self.config.rate(channel))
        if budget.ceiling > 0:
            self.rates[channel] = slow_down(self.config, budget, seconds)

    def resume_at(self, channel: str) -> float:
        """The monotonic instant a 429 paused ``channel`` until (0: not paused)."""
        return self._paused_until.get(channel, 0.0)

    def paused(self, channel: str) -> bool:
        return self.resume_at(channel) > time.monotonic()

    def chat_ready_at(self, channel: str, address: str, deadline: float) -> float:
        """The deadline pushed back so one chat gets at most one message per interval."""
        key, interval = (channel, address), self.config.per_chat_interval
        # Also after the last send's answer, so a row is not planned to miss again.
        answered_at = self._chat_answered_at.get(key)
        after_answer = answered_at + interval if answered_at is not None else 0.0
        ready = max(deadline, self._chat_free_at.get(key, 0.0), after_answer)
        self._chat_free_at[key] = ready + interval
        return ready

    @contextmanager
    def chat_turn(self, channel: str, address: str) -> Iterator[Callable[[], None]]:
        """Hold one chat while a worker thread sends to it: its sends leave one at a time,
        each ``per_chat_interval`` after the previous one was answered (providers count
        arrivals, not plans). The block calls what it is given once the send is answered;
        a turn that sent nothing leaves the chat as it was."""
        interval = self.config.per_chat_interval
        if interval <= 0:
            yield lambda: None
            return
        key = (channel, address)
        with self._lock:
            lock = self._chat_locks.setdefault(key, threading.Lock())
        with lock:
            answered_at = self._chat_answered_at.get(key)
            if answered_at is not None:
                time.sleep(max(0.0, answered_at + interval - time.monotonic()))
            yield lambda: self._chat_answered_at.__setitem__(key, time.monotonic())
