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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from core.config import NudgeConfig
from scheduled_sends.models import MaterializeCycle, MaterializeSlice
from scheduled_sends.queue.transitions import run_statement
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
            found, _ = run_statement(sql.SLICE_BOUNDS, {"size": config.materialize_slice_users})
            bounds = [id_ for (id_,) in found]
            ranges = list(zip([0, *bounds], [*bounds, None], strict=True))
            cycle.slices = len(ranges)
            cycle.save(update_fields=["slices"])
            # Claim order from where the last cycle stopped, if it left slices undone (a
            # short cycle must not leave out the same users every time).
            undone, _ = run_statement(sql.FIRST_UNDONE_AFTER, {"cycle": starts_at})
            resume_after = undone[0][0] if undone else 0
            first = next((i for i, (after, _) in enumerate(ranges) if after >= resume_after), 0)
            MaterializeSlice.objects.bulk_create(
                MaterializeSlice(cycle=cycle, position=position, after_id=after, up_to=up_to)
                for position, (after, up_to) in enumerate(ranges[first:] + ranges[:first])
            )
            # Their slices go with them (on_delete=CASCADE).
            MaterializeCycle.objects.filter(starts_at__lt=starts_at - KEEP_CYCLES).delete()
    except IntegrityError:
        return MaterializeCycle.objects.get(pk=starts_at)
    return cycle


@dataclass(eq=False)
class Visit:
    """A slice this participant holds (``claim_slice``), as its visitor fills it in; the
    lease is renewed a few times per lease period."""

    id: int
    position: int
    after_id: int
    up_to: int | None
    taken_over: bool
    me: str
    renew_every: float
    users: int = 0  # users of the slice taken in
    whole: bool = True  # every user taken in: not cut short by the budget, the lease kept
    held: bool = True
    renewed: float = field(default_factory=time.monotonic)

    def keep(self) -> bool:
        """Renew the lease when due; False once the slice was taken over."""
        if self.held and time.monotonic() - self.renewed >= self.renew_every:
            self.held = renew_lease(self.id, self.me)
            self.renewed = time.monotonic()
        return self.held


def claim_slice(cycle: datetime, me: str, config: NudgeConfig) -> Visit | None:
    """The next free slice of the cycle, now held by ``me``; None if none is free."""
    params = {"cycle": cycle, "me": me, "lease": config.materialize_slice_lease}
    rows, _ = run_statement(sql.CLAIM_SLICE, params)
    renew_every = config.materialize_slice_lease.total_seconds() / 3
    return Visit(*rows[0], me, renew_every) if rows else None


def renew_lease(slice_id: int, me: str) -> bool:
    """Still ours? Renews the lease; False once another participant took it over."""
    return run_statement(sql.RENEW_LEASE, {"slice": slice_id, "me": me})[1] == 1


def finish_slice(slice_id: int, me: str, users: int) -> bool:
    """Mark the slice done; False if it was taken over (then the taker finishes it)."""
    return run_statement(sql.FINISH_SLICE, {"slice": slice_id, "me": me, "users": users})[1] == 1


def cycle_state(cycle: datetime, config: NudgeConfig) -> CycleState:
    rows, _ = run_statement(
        sql.CYCLE_STATE, {"cycle": cycle, "lease": config.materialize_slice_lease}
    )
    return CycleState(*rows[0])


def take_part(
    cycle: MaterializeCycle,
    config: NudgeConfig,
    visitor: UserFlow,
    *,
    deadline: float,
) -> None:
    """Claim and visit slices until none is left, the budget is spent or a newer cycle
    began, counting them in the visitor's report; with nothing free, poll while others
    hold slices, to take over a dead one's. A slice is marked done only once the visitor
    has planned every user of it."""
    report = visitor.report
    report.participant = me = participant_name()
    while True:
        _settle(visitor.settled())
        if time.monotonic() >= deadline:
            _settle(visitor.finish())
            # Cut short only if it leaves slices nobody holds; others may finish theirs.
            report.cut_short = cycle_state(cycle.starts_at, config).free > 0
            return
        taken = claim_slice(cycle.starts_at, me, config)
        if taken is None:
            finished = visitor.finish()
            if finished:  # ours are done now: the cycle may have changed meanwhile
                _settle(finished)
                continue
            state = cycle_state(cycle.starts_at, config)
            if state.complete or state.superseded:
                return
            wait = WAIT_POLL_SECONDS
            if state.first_lapse_seconds is not None:
                wait = min(wait, max(state.first_lapse_seconds, 0.05))
            time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
            continue
        report.slices_taken += 1
        report.slices_taken_over += taken.taken_over
        if taken.taken_over:
            logger.warning(
                "materialize took over a slice whose lease lapsed",
                extra={"cycle": cycle.starts_at.isoformat(), "position": taken.position},
            )
        visitor.start(taken)


def _settle(visits: list[Visit]) -> None:
    """Mark each settled slice done, or hand back one left half-visited (unless taken over)
    for the next participant to take at once."""
    for visit in visits:
        if visit.whole:
            finish_slice(visit.id, visit.me, visit.users)
        elif visit.held:
            run_statement(sql.RELEASE_SLICE, {"slice": visit.id, "me": visit.me})


@contextmanager
def smoothing_turn() -> Iterator[None]:
    """One participant smooths at a time (two would fill the same earlier minute); a
    session lock, freed if the process dies."""
    run_statement(sql.SMOOTHING_LOCK)
    try:
        yield
    finally:
        run_statement(sql.SMOOTHING_UNLOCK)
