"""The materializing sweep (cron: every 15 minutes): once a cycle, sync each user's
calendars and queue one ``scheduled_sends`` row per nudge due within the look-ahead.
Every process of the cron line takes part in its slot's shared cycle (``sweeps/cycle.py``).
Everything about a user happens in their scope; only the list of users is unscoped.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model

from calendars.sync import Outcome, SyncSummary
from calendars.sync_pool import SyncPool
from core.config import NudgeConfig
from core.display import plural
from core.executor import Executor
from pacing.pacer import rates_in_force
from scheduled_sends.models import MaterializeCycle, SweepRun
from scheduled_sends.queue.transitions import database_now
from scheduled_sends.runlog import MaterializeCounts, add_outcomes, recorded_run
from sweeps import cycle as shared_cycle
from sweeps.cycle import Visit
from sweeps.replan import PlannedSet, UserResult, materialize_users
from sweeps.smoothing import smooth_bursts

logger = logging.getLogger("nudge.materialize")

# Users planned together in one ``planning_scope`` transaction: enough to spread a
# statement's cost, few enough that a failed set replanned one by one is cheap.
PLANNED_TOGETHER = 200


@dataclass(kw_only=True)
class MaterializeReport(MaterializeCounts):
    as_of: datetime
    cycle: datetime | None = None  # recorded as ISO 8601 ("" for named users)
    users: int = 0
    queued: int = 0
    removed: int = 0
    capped_users: int = 0
    capped_nudges: int = 0
    disabled_users: int = 0
    failed_users: int = 0
    provider_calls: int = 0
    moved_earlier: int = 0
    sets_planned_alone: int = 0
    planned_alone_because: str = ""
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    visited: int = 0  # users planned so far (``users`` counts those taken in)
    cycle_was_complete: bool = False  # found done on arrival: this run did nothing

    NOT_RECORDED = frozenset({"planned_alone_because", "errors", "visited", "cycle_was_complete"})

    @property
    def ok(self) -> bool:
        return self.failed_users == 0

    def summary(self) -> str:
        if self.cycle_was_complete:
            return (
                f"materialize: cycle {self.cycle:%H:%M}Z is already complete "
                f"({plural(self.cycle_slices, 'slice')}, "
                f"{plural(self.participants, 'participant')}); "
                "this one did nothing"
            )
        text = (
            f"materialize: users {self.users}, queued {self.queued}, removed {self.removed}, "
            f"calendars synced {self.calendars_synced} (unchanged {self.calendars_unchanged}, "
            f"failed {self.calendars_failed}), failed users {self.failed_users}, "
            f"moved earlier {self.moved_earlier} in {self.seconds:.1f}s"
        )
        if self.cycle is not None:
            text += (
                f"; cycle {self.cycle:%H:%M}Z: took {plural(self.slices_taken, 'slice')}"
                f" ({self.slices_taken_over} taken over), {self.cycle_slices_done}"
                f"/{self.cycle_slices} done, {plural(self.participants, 'participant')}"
            )
        if self.cut_short and self.cycle is not None:
            text += "; CUT SHORT by its budget, the next cycle starts with the slices left"
        elif self.cut_short:
            text += "; CUT SHORT by its budget: the users not reached wait for the next cycle"
        if self.rates:
            text += "; rate " + ", ".join(f"{b} {r:.1f}/s" for b, r in sorted(self.rates.items()))
        if self.capped_nudges:
            text += (
                f"; capped {self.capped_nudges} nudges of {self.capped_users} users "
                "(per-user limits)"
            )
        if self.sets_planned_alone:
            text += (
                f" — WARNING: {plural(self.sets_planned_alone, 'set')} of users could not "
                f"be planned together; each user was planned alone ({self.planned_alone_because})"
            )
        if self.overdue_unclaimed:
            text += (
                f" — WARNING: {self.overdue_unclaimed} due rows are still unclaimed "
                "(is deliver running?)"
            )
        return text

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "cycle": self.cycle.isoformat() if self.cycle else ""}


def users_to_visit(
    user_ids: Iterable[int] | None = None, *, after_id: int = 0, up_to: int | None = None
) -> Iterator[int]:
    """Active user ids: those named, or a slice's (``after_id`` < id <= ``up_to``). Unscoped."""
    users = get_user_model().objects.filter(is_active=True, pk__gt=after_id)
    if up_to is not None:
        users = users.filter(pk__lte=up_to)
    if user_ids is not None:
        users = users.filter(pk__in=list(user_ids))
    yield from users.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=2000)


class UserFlow:
    """Users through a run: calendars synced many at a time (``SyncPool``), then planned
    ``PLANNED_TOGETHER`` at a time. As the cycle's visitor (``cycle.take_part``) it tags
    each user with its slice, so the next slice's fetches start while the last are out; a
    slice settles once all its users are planned. Given ``requeue`` (the minute job), a
    user whose every fetch was deferred is not planned, and each user's sync summary and
    result (None: not planned) are passed to it once counted."""

    def __init__(
        self,
        report: MaterializeReport,
        config: NudgeConfig,
        *,
        deadline: float | None,
        sync: bool = True,
        progress=None,
        requeue: Callable[[SyncSummary, UserResult | Exception | None], None] | None = None,
    ) -> None:
        self.report, self.config, self.progress, self.deadline = report, config, progress, deadline
        self.requeue = requeue
        self.pool = SyncPool(now=report.as_of, config=config, deadline=deadline) if sync else None
        self._ready: list[tuple[int, SyncSummary | None]] = []
        self._tag_of: dict[int, Visit | None] = {}
        self._unplanned: Counter[Visit | None] = Counter()  # tag -> its users not planned yet
        self._closed: list[Visit] = []  # slices with every user added, not reported yet
        self._planning: deque[tuple[list[tuple[int, SyncSummary | None]], Future]] = deque()
        # Planning on its own worker and connection while fetches go on; inline without sync.
        self._planner = Executor(1 if sync else 0, "plan")

    def __enter__(self) -> UserFlow:
        if self.pool is not None:
            self.pool.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._planner.close()
        finally:
            if self.pool is not None:
                self.pool.__exit__(*exc)

    def add(
        self, user_id: int, tag: Visit | None = None, connection_ids: Collection[int] | None = None
    ) -> None:
        """Take a user in (only ``connection_ids`` of theirs synced, if given); waits only
        while the pool is full, planning whoever is ready."""
        self.report.users += 1
        self._tag_of[user_id] = tag
        self._unplanned[tag] += 1
        if self.pool is None:
            self._ready.append((user_id, None))
        else:
            self._ready.extend(self.pool.admit(user_id, connection_ids))
        self._plan(PLANNED_TOGETHER)

    def start(self, visit: Visit) -> None:
        """Take a slice's users in, renewing its lease (and those of earlier slices whose
        last users are still out)."""
        for user_id in users_to_visit(after_id=visit.after_id, up_to=visit.up_to):
            if time.monotonic() >= self.deadline:
                visit.whole = False
                break
            for earlier in self._closed:
                earlier.keep()
            if not visit.keep():
                visit.whole = False
                break
            self.add(user_id, visit)
            visit.users += 1
        self._closed.append(visit)

    def settled(self) -> list[Visit]:
        """Closed tags whose every user is planned, not reported before; never waits. A
        closed tag whose remaining users are synced is planned now, in a smaller set."""
        if self.pool is not None:
            self._ready.extend(self.pool.finished())
        self._count_planned(wait_for=0)
        on_the_way = Counter(self._tag_of[user_id] for user_id, _ in self._ready)
        if not any(on_the_way[tag] for tag in self._closed):
            return self._report_settled()
        for ready, _future in self._planning:
            on_the_way.update(self._tag_of[user_id] for user_id, _ in ready)
        if any(on_the_way[tag] == self._unplanned[tag] > 0 for tag in self._closed):
            self._plan(1)
            self._count_planned(wait_for=0)
        return self._report_settled()

    def finish(self) -> list[Visit]:
        """Wait for every user taken in and plan them; the closed tags not reported before."""
        if self.pool is not None:
            self._ready.extend(self.pool.drain())
        self._plan(1)
        self._count_planned(wait_for=len(self._planning))
        return self._report_settled()

    def _report_settled(self) -> list[Visit]:
        done = [tag for tag in self._closed if not self._unplanned[tag]]
        self._closed = [tag for tag in self._closed if self._unplanned[tag]]
        return done

    def _plan(self, at_least: int) -> None:
        if not self._ready or len(self._ready) < at_least:
            return
        ready, self._ready = self._ready, []
        planned = [user_id for user_id, synced in ready if self._plans(synced)]
        planning = self._planner.submit(materialize_users, planned, self.report.as_of, self.config)
        self._planning.append((ready, planning))
        # At most one set waits behind the one being planned: the rest wait as users.
        self._count_planned(wait_for=len(self._planning) - 2)

    def _plans(self, synced: SyncSummary | None) -> bool:
        """Not one whose calendars could not be read, nor (``requeue``) one with nothing
        fetched."""
        if synced is None:
            return True
        if synced.unreadable is not None:
            return False
        # Only the minute job asks: a cycle plans every readable user.
        return not self.requeue or any(r.outcome != Outcome.DEFERRED for r in synced.results)

    def _count_planned(self, *, wait_for: int) -> None:
        """Count finished sets, oldest first, waiting for the oldest ``wait_for``."""
        while self._planning and (wait_for > 0 or self._planning[0][1].done()):
            ready, future = self._planning.popleft()
            self._counted(ready, future.result())
            wait_for -= 1

    def _counted(self, ready: list[tuple[int, SyncSummary | None]], planned: PlannedSet) -> None:
        """Count a planned set's users into the report (on the run's own thread)."""
        report = self.report
        if planned.planned_alone_because:
            report.sets_planned_alone += 1
            report.planned_alone_because = planned.planned_alone_because
        for user_id, synced in ready:
            if synced is not None:
                _absorb_sync(report, synced)
            result = planned.results.get(user_id, synced and synced.unreadable)
            if self.requeue:
                self.requeue(synced, result)
            if result is None:
                continue
            if isinstance(result, Exception):
                report.failed_users += 1
                report.errors.append(f"user {user_id}: {type(result).__name__}")
                logger.error(
                    "planning failed for one user", exc_info=result, extra={"user_id": user_id}
                )
                continue
            report.queued += result.queued
            report.removed += result.removed
            report.overdue_unclaimed += result.overdue
            report.capped_users += bool(result.capped)
            report.capped_nudges += result.capped
            report.disabled_users += result.skipped_disabled
            report.visited += 1
            if self.progress and report.visited % 1000 == 0:
                self.progress(report)
        for user_id, _ in ready:
            self._unplanned[self._tag_of.pop(user_id)] -= 1


def run_materialize(
    now: datetime | None = None,
    *,
    user_ids: Iterable[int] | None = None,
    progress=None,
    sync_calendars: bool = True,
) -> MaterializeReport:
    """Take part in the cycle of ``now`` (every slice through one ``UserFlow``; a complete
    cycle is reported, not run again), then smooth bursts. ``user_ids`` plans only those,
    in a run of their own. ``progress`` is called every 1,000 users."""
    config = NudgeConfig.from_settings()
    started = time.monotonic()
    now = now or database_now()
    deadline = started + config.materialize_budget_seconds
    cycle = None
    if user_ids is None:
        cycle = shared_cycle.join_cycle(now, config)
        state = shared_cycle.cycle_state(cycle.starts_at, config)
        if state.complete:
            report = MaterializeReport(as_of=cycle.as_of, cycle_was_complete=True)
            _absorb_cycle_state(report, cycle, state)
            return report
    as_of = cycle.as_of if cycle else now
    report = MaterializeReport(as_of=as_of)
    with recorded_run(
        SweepRun.Sweep.MATERIALIZE, report, budget_seconds=config.materialize_budget_seconds
    ):
        with UserFlow(
            report, config, deadline=deadline, sync=sync_calendars, progress=progress
        ) as flow:
            if cycle is None:
                for user_id in users_to_visit(user_ids):
                    if time.monotonic() >= deadline:
                        report.cut_short = True
                        break
                    flow.add(user_id)
                flow.finish()
            else:
                shared_cycle.take_part(cycle, config, flow, deadline=deadline)
        if cycle is not None:
            _absorb_cycle_state(report, cycle, shared_cycle.cycle_state(cycle.starts_at, config))
        # One participant smooths at a time; a late joiner must not move rows into
        # minutes already being delivered.
        with shared_cycle.smoothing_turn():
            report.moved_earlier = smooth_bursts(max(now, as_of), config)
        if report.provider_calls:
            # The providers' shared rates; the channels' are deliver's to report.
            report.rates = {
                state.budget: state.rate
                for state in rates_in_force(config)
                if state.app_wide and state.budget not in config.channel_rates
            }
        report.seconds = time.monotonic() - started
    return report


def _absorb_cycle_state(
    report: MaterializeReport, cycle: MaterializeCycle, state: shared_cycle.CycleState
) -> None:
    report.cycle = cycle.starts_at
    report.participants = state.participants
    report.cycle_slices = state.slices
    report.cycle_slices_done = state.done


def _absorb_sync(report: MaterializeReport, summary: SyncSummary) -> None:
    report.calendars_synced += summary.synced
    report.calendars_unchanged += summary.unchanged
    report.calendars_failed += summary.failed
    report.calendars_needing_reauth += summary.needs_reauth
    report.calendars_deferred += summary.deferred
    report.provider_calls += summary.provider_calls
    for result in summary.results:
        add_outcomes(report.calendar_outcomes, {result.provider: {result.outcome: 1}})
