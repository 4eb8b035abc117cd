"""One materialize cycle (a 15-minute slot) shared by every process that runs it.

The slot's first run splits the active users into slices; each participant claims
one at a time (``SKIP LOCKED``), renews its lease while visiting, and marks it done.
A lapsed lease is taken over in the same cycle (a participant with nothing free
waits while others hold slices). Not tenant tables: no scope.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import IntegrityError, connection, transaction

from core.config import NudgeConfig
from scheduled_sends.models import MaterializeCycle, MaterializeSlice
from sweeps import cycle_statements as sql

if TYPE_CHECKING:
    from sweeps.materialize import UserFlow

logger = logging.getLogger("nudge.materialize")

KEEP_CYCLES = timedelta(days=2)
# How often a participant with nothing free looks again while others hold slices.
WAIT_POLL_SECONDS = 1.0


def cycle_start(instant: datetime) -> datetime:
    """The cycle an instant belongs to: its 15-minute slot."""
    floored = instant.replace(second=0, microsecond=0)
    return floored - timedelta(minutes=floored.minute % 15)


def participant_name() -> str:
    """Who holds a slice, as an operator would look for it: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"[:100]


@dataclass(frozen=True)
class Slice:
    id: int
    position: int
    after_id: int
    up_to: int | None
    taken_over: bool


@dataclass(frozen=True)
class CycleState:
    slices: int
    done: int
    free: int
    participants: int
    first_lapse_seconds: float | None  # until the first lease held by anyone lapses
    superseded: bool  # a newer cycle exists

    @property
    def complete(self) -> bool:
        return self.done == self.slices


def join_cycle(now: datetime, config: NudgeConfig) -> MaterializeCycle:
    """The cycle of ``now``, created with its slices by the first to arrive; everyone
    plans from its ``as_of``, the first one's instant."""
    starts_at = cycle_start(now)
    existing = MaterializeCycle.objects.filter(pk=starts_at).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            cycle = MaterializeCycle.objects.create(starts_at=starts_at, as_of=now, slices=0)
            bounds = _slice_bounds(config.materialize_slice_users)
            ranges = list(zip([0, *bounds], [*bounds, None], strict=True))
            cycle.slices = len(ranges)
            cycle.save(update_fields=["slices"])
            MaterializeSlice.objects.bulk_create(
                MaterializeSlice(cycle=cycle, position=position, after_id=after, up_to=up_to)
                for position, (after, up_to) in _rotated(ranges, _resume_after(starts_at))
            )
            _prune(starts_at)
    except IntegrityError:
        return MaterializeCycle.objects.get(pk=starts_at)
    return cycle


def _slice_bounds(size: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(sql.SLICE_BOUNDS, {"size": size})
        return [row[0] for row in cursor.fetchall()]


def _resume_after(starts_at: datetime) -> int:
    """Where the previous cycle stopped, if it left slices undone."""
    with connection.cursor() as cursor:
        cursor.execute(sql.FIRST_UNDONE_AFTER, {"cycle": starts_at})
        row = cursor.fetchone()
    return row[0] if row else 0


def _rotated(
    ranges: list[tuple[int, int | None]], resume_after: int
) -> Iterator[tuple[int, tuple[int, int | None]]]:
    """Claim order from where the last cycle stopped (a short cycle must not leave out
    the same users every time)."""
    first = next((i for i, (after, _) in enumerate(ranges) if after >= resume_after), 0)
    order = ranges[first:] + ranges[:first]
    return enumerate(order)


def _prune(starts_at: datetime) -> None:
    old = MaterializeCycle.objects.filter(starts_at__lt=starts_at - KEEP_CYCLES)
    MaterializeSlice.objects.filter(cycle__in=old).delete()
    old.delete()


def claim_slice(cycle: datetime, me: str, config: NudgeConfig) -> Slice | None:
    """The next free slice of the cycle, now held by ``me``; None if none is free."""
    with connection.cursor() as cursor:
        cursor.execute(
            sql.CLAIM_SLICE, {"cycle": cycle, "me": me, "lease": config.materialize_slice_lease}
        )
        row = cursor.fetchone()
    return Slice(*row) if row else None


def renew_lease(slice_id: int, me: str) -> bool:
    """Still ours? Renews the lease; False once another participant took it over."""
    return _holder_update(sql.RENEW_LEASE, slice_id, me)


def finish_slice(slice_id: int, me: str, users: int) -> bool:
    """Mark the slice done; False if it was taken over (then the taker finishes it)."""
    return _holder_update(sql.FINISH_SLICE, slice_id, me, users=users)


def release_slice(slice_id: int, me: str) -> bool:
    """Hand back a slice left half-visited, for the next participant to take at once."""
    return _holder_update(sql.RELEASE_SLICE, slice_id, me)


def _holder_update(statement: str, slice_id: int, me: str, **params: object) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(statement, {"slice": slice_id, "me": me, **params})
        return cursor.rowcount == 1


def cycle_state(cycle: datetime, config: NudgeConfig) -> CycleState:
    with connection.cursor() as cursor:
        cursor.execute(sql.CYCLE_STATE, {"cycle": cycle, "lease": config.materialize_slice_lease})
        slices, done, free, participants, lapse, superseded = cursor.fetchone()
    return CycleState(
        slices, done, free, participants, None if lapse is None else float(lapse), superseded
    )


class Lease:
    """The holder's side of a slice's lease: renewed a few times per lease period."""

    def __init__(self, slice_id: int, me: str, config: NudgeConfig) -> None:
        self.slice_id, self.me = slice_id, me
        self.every = config.materialize_slice_lease.total_seconds() / 3
        self.renewed = time.monotonic()
        self.held = True

    def keep(self) -> bool:
        """Renew when due; False once the slice was taken over."""
        if self.held and time.monotonic() - self.renewed >= self.every:
            self.held = renew_lease(self.slice_id, self.me)
            self.renewed = time.monotonic()
        return self.held


@dataclass
class Participation:
    """What one participant did in a cycle, and how the cycle stood when it left."""

    me: str
    slices_taken: int = 0
    slices_taken_over: int = 0
    cut_short: bool = False  # its budget ran out with slices nobody holds


@dataclass(eq=False)
class Visit:
    """A slice this participant took, as its visitor fills it in."""

    taken: Slice
    lease: Lease
    users: int = 0  # users of the slice taken in
    whole: bool = True  # every user taken in: not cut short by the budget, the lease kept


def take_part(
    cycle: MaterializeCycle,
    config: NudgeConfig,
    visitor: UserFlow,
    *,
    deadline: float,
) -> Participation:
    """Claim and visit slices until none is left, the budget is spent or a newer cycle
    began; with nothing free, poll while others hold slices, to take over a dead one's.
    A slice is marked done only once the visitor has planned every user of it."""
    me = participant_name()
    part = Participation(me=me)
    while True:
        _settle(visitor.settled(), part)
        if time.monotonic() >= deadline:
            _settle(visitor.finish(), part)
            # Cut short only if it leaves slices nobody holds; others may finish theirs.
            part.cut_short = cycle_state(cycle.starts_at, config).free > 0
            return part
        taken = claim_slice(cycle.starts_at, me, config)
        if taken is None:
            finished = visitor.finish()
            if finished:  # ours are done now: the cycle may have changed meanwhile
                _settle(finished, part)
                continue
            state = cycle_state(cycle.starts_at, config)
            if state.complete or state.superseded:
                return part
            wait = WAIT_POLL_SECONDS
            if state.first_lapse_seconds is not None:
                wait = min(wait, max(state.first_lapse_seconds, 0.05))
            time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
            continue
        part.slices_taken += 1
        part.slices_taken_over += taken.taken_over
        if taken.taken_over:
            logger.warning(
                "materialize took over a slice whose lease lapsed",
                extra={"cycle": cycle.starts_at.isoformat(), "position": taken.position},
            )
        visitor.start(Visit(taken, Lease(taken.id, me, config)))


def _settle(visits: list[Visit], part: Participation) -> None:
    """Mark each settled slice done, or hand back one left half-visited (unless taken over)."""
    for visit in visits:
        if visit.whole:
            finish_slice(visit.taken.id, part.me, visit.users)
        elif visit.lease.held:
            release_slice(visit.taken.id, part.me)


@contextmanager
def smoothing_turn() -> Iterator[None]:
    """One participant smooths at a time (two would fill the same earlier minute); a
    session lock, freed if the process dies."""
    with connection.cursor() as cursor:
        cursor.execute(sql.SMOOTHING_LOCK)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(sql.SMOOTHING_UNLOCK)
