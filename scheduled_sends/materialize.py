"""The materialising sweep (cron: every 15 minutes).

Work moves earlier: once per run, for each user, sync their calendars and
write one ``scheduled_sends`` row per nudge due within the look-ahead, so
that delivery is a single indexed claim rather than a per-tenant scan.

Everything about a user happens inside that user's ``tenant_scope``; the only
unscoped read is the list of users to visit (``auth_user`` is not a tenant
table). The bypass is never used here.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.db.models import BooleanField, ExpressionWrapper, F
from django.utils import timezone

from accounts.models import DeliverySettings
from accounts.rules import SkipReason, hold_for_quiet_hours, pause_reason
from calendars.models import CalendarEvent, ConnectionStatus, EventStatus, FollowUp
from calendars.providers.normalize import sorted_leads
from calendars.sync import SyncPool, SyncSummary, sync_user_connections
from core.config import NudgeConfig
from scheduled_sends.models import Kind, ScheduledSend, SweepRun
from scheduled_sends.queue import statements, states, transitions
from scheduled_sends.queue.transitions import database_now
from scheduled_sends.runlog import MaterializeCounts, recorded_run
from scheduled_sends.smoothing import smooth_bursts
from scheduled_sends.subjects import event_skip_reason, follow_up_skip_reason
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.materialize")

# user_rank is a smallint; beyond this every further nudge shares the last rank.
MAX_RANK = 32_767


@dataclass(frozen=True)
class PlannedNudge:
    kind: str
    ref_id: int
    intended_at: datetime  # subject start - lead; the send time starts here
    subject_starts_at: datetime

    @property
    def key(self) -> tuple[str, int, datetime]:
        return (self.kind, self.ref_id, self.intended_at)

    def worth_queueing(self, now: datetime) -> bool:
        """A nudge first queued now must still precede its subject.

        A row already queued for a subject that has since begun is left for
        delivery to settle (skipped, with the reason support will look for).
        """
        return self.subject_starts_at > now


def _in_window(intended_at: datetime, now: datetime, config: NudgeConfig) -> bool:
    """Inside the look-ahead, and if already past, still inside the grace window."""
    return now - config.grace < intended_at <= now + config.lookahead


# (intended instant, subject start) -> when the nudge may go, or why it may not.
IntendedTimeRule = Callable[[datetime, datetime], "datetime | SkipReason"] | None


def _held(hold: IntendedTimeRule, intended_at: datetime, starts_at: datetime) -> datetime:
    """Quiet hours move a nudge to their end; one they would skip keeps its time,
    and delivery settles it ``skipped`` with the reason (accounts.rules)."""
    moved = hold(intended_at, starts_at) if hold else intended_at
    return moved if isinstance(moved, datetime) else intended_at


def plan_event_nudges(
    events: Iterable[CalendarEvent],
    default_lead: timedelta,
    now: datetime,
    config: NudgeConfig,
    hold: IntendedTimeRule = None,
) -> list[PlannedNudge]:
    """One nudge per distinct reminder lead of each event, else the user's default."""
    max_minutes = int(config.max_lead.total_seconds() // 60)
    planned = []
    for event in events:
        skip = event_skip_reason(
            found=True,
            cancelled=event.status == EventStatus.CANCELLED,
            declined=event.declined,
            all_day=event.all_day,
            needs_reauth=False,  # those connections' events are not read (plan_for_user)
        )
        if skip:
            continue
        # Beyond the cap comes at the cap (ARCHITECTURE, "Reminders"); 0 is "at the time".
        # The sync already keeps the nearest few leads; rows written another way
        # (imports, the admin) are held to the same rule here.
        minutes = {min(m, max_minutes) for m in event.reminder_minutes if m >= 0}
        leads = [timedelta(minutes=m) for m in sorted_leads(minutes)]
        for lead in leads or [default_lead]:
            intended_at = _held(hold, event.starts_at - lead, event.starts_at)
            if _in_window(intended_at, now, config):
                planned.append(PlannedNudge(Kind.EVENT, event.pk, intended_at, event.starts_at))
    return planned


def plan_follow_up_nudges(
    follow_ups: Iterable[FollowUp],
    default_lead: timedelta,
    now: datetime,
    config: NudgeConfig,
    hold: IntendedTimeRule = None,
) -> list[PlannedNudge]:
    """A follow-up is nudged the user's default lead before it is due."""
    planned = []
    for follow_up in follow_ups:
        if follow_up_skip_reason(found=True, done=follow_up.done):
            continue
        intended_at = _held(hold, follow_up.due_at - default_lead, follow_up.due_at)
        if _in_window(intended_at, now, config):
            planned.append(
                PlannedNudge(Kind.FOLLOW_UP, follow_up.pk, intended_at, follow_up.due_at)
            )
    return planned


def cap_per_user(
    planned: list[PlannedNudge], config: NudgeConfig
) -> tuple[list[PlannedNudge], int]:
    """At most so many nudges per minute and per look-ahead for one user; how many fell out.

    One tenant's feed must not flood the shared queue: the earliest nudges
    are kept, the rest dropped — counted, recorded on the user's settings and
    in the run log, never silently.
    """
    kept, per_minute = [], Counter()
    for nudge in sorted(planned, key=lambda n: (n.intended_at, n.kind, n.ref_id)):
        minute = _minute(nudge.intended_at)
        if len(kept) >= config.max_nudges_per_user:
            break
        if per_minute[minute] >= config.max_nudges_per_user_minute:
            continue
        per_minute[minute] += 1
        kept.append(nudge)
    return kept, len(planned) - len(kept)


@dataclass
class UserResult:
    queued: int = 0
    removed: int = 0
    overdue: int = 0
    capped: int = 0
    skipped_disabled: bool = False


def plan_for_user(
    user_id: int, delivery: DeliverySettings | None, now: datetime, config: NudgeConfig
) -> list[PlannedNudge] | None:
    """The nudges the user should have queued now; None when nudges are off.

    Must run inside the user's tenant scope.
    """
    if delivery is None or not delivery.enabled or pause_reason(delivery) is not None:
        return None
    default_lead = timedelta(minutes=delivery.default_lead_minutes)
    hold = functools.partial(hold_for_quiet_hours, settings=delivery)
    start, end = config.subject_window(now)
    events = CalendarEvent.objects.filter(
        user_id=user_id, starts_at__gt=start, starts_at__lte=end
    ).exclude(connection__status=ConnectionStatus.NEEDS_REAUTH)
    follow_ups = FollowUp.objects.filter(
        user_id=user_id, done=False, due_at__gt=start, due_at__lte=end
    )
    return plan_event_nudges(events, default_lead, now, config, hold) + plan_follow_up_nudges(
        follow_ups, default_lead, now, config, hold
    )


def materialize_user(user_id: int, now: datetime, config: NudgeConfig) -> UserResult:
    """Bring one user's pending queue in line with their calendar and follow-ups.

    Inserts what is missing (idempotently) and deletes pending, unclaimed rows
    that no longer match their subject — moved, cancelled, deleted, done,
    re-timed, or the user turned nudges off — so the queue holds only what
    will really be sent. Deleting (rather than settling as skipped) lets an
    event moved away and back again be queued afresh.
    """
    # Everything written here is derived again by the next run (inserts are
    # idempotent, stale rows are found again, delivery re-checks every
    # subject), so the commit need not wait for the disk: waiting for the
    # flush was most of a user's time.
    with tenant_scope(user_id, relaxed_commit=True):
        return queue_user_in_scope(user_id, now, config)


def queue_user_in_scope(user_id: int, now: datetime, config: NudgeConfig) -> UserResult:
    """``materialize_user`` inside the user's scope, already open: the sweep runs it
    in the transaction that writes the user's last synced calendar (``SyncPool``)."""
    result = UserResult()
    # A deactivated user is planned nothing (their pending rows are withdrawn).
    delivery = DeliverySettings.objects.filter(user_id=user_id, user__is_active=True).first()
    planned = plan_for_user(user_id, delivery, now, config)
    result.skipped_disabled = planned is None
    planned, result.capped = cap_per_user(planned or [], config)
    if delivery is not None and delivery.capped_nudges != result.capped:
        DeliverySettings.objects.filter(pk=delivery.pk).update(
            capped_nudges=result.capped, capped_at=now if result.capped else None
        )
    wanted = {nudge.key: nudge for nudge in planned}
    # Overdue: evidence that delivery is not happening, read in the user's
    # own scope so a broken bypass cannot hide it (see health.py).
    pending = (
        ScheduledSend.objects.filter(
            states.unsettled(), states.inside_grace(now, config.grace), user_id=user_id
        )
        .annotate(
            overdue=ExpressionWrapper(
                states.overdue_unclaimed(now, config.grace, config.overdue_after),
                output_field=BooleanField(),
            )
        )
        .values_list("id", "kind", "ref_id", "intended_at", "fire_at", "claimed_at", "overdue")
    )
    stale_ids = []
    per_minute: Counter[datetime] = Counter()  # this user's queued rows per send minute
    for row_id, kind, ref_id, intended_at, fire_at, claimed_at, overdue in pending:
        if (kind, ref_id, intended_at) in wanted:
            wanted.pop((kind, ref_id, intended_at))
            per_minute[_minute(fire_at)] += 1
            result.overdue += overdue
        elif claimed_at is None:
            stale_ids.append(row_id)
    result.removed = transitions.withdraw_unclaimed(stale_ids)
    # Still in cap_per_user's order (earliest first), which the ranks follow.
    to_insert = [nudge for nudge in wanted.values() if nudge.worth_queueing(now)]
    channel = delivery.channel if delivery else ""
    result.queued = transitions.enqueue(user_id, channel, _ranked(to_insert, per_minute))
    return result


def refresh_queue(user_id: int, now: datetime | None = None, **_signal_kwargs: object) -> None:
    """Re-materialise one user now, so a change does not wait for the next sweep.

    Called after a user's own change (a follow-up, a link, a calendar) and, as
    the receiver of ``accounts.signals.delivery_settings_changed``, after their
    settings changed. A failure is logged, not raised: the change itself is
    saved, and the next sweep catches up.
    """
    try:
        materialize_user(user_id, now or timezone.now(), NudgeConfig.from_settings())
    except Exception:
        logger.exception(
            "re-materialising a user after a change failed", extra={"user_id": user_id}
        )


def refresh_calendars_and_queue(user_id: int, now: datetime | None = None) -> None:
    """Sync the user's calendars, then re-materialise them: a new connection's
    events are nudged without waiting for the next sweep. Never raises."""
    now = now or timezone.now()
    config = NudgeConfig.from_settings()
    start, end = config.subject_window(now)
    try:
        sync_user_connections(user_id, now=now, window_start=start, window_end=end, config=config)
    except Exception:
        logger.exception(
            "syncing a user's calendars after a change failed", extra={"user_id": user_id}
        )
    refresh_queue(user_id, now)


def _minute(instant: datetime) -> datetime:
    return instant.replace(second=0, microsecond=0)


def _ranked(
    nudges: list[PlannedNudge], per_minute: Counter[datetime]
) -> list[transitions.NewNudge]:
    """Each nudge ranked after the user's rows already in its minute (the claim's fairness)."""
    ranked = []
    for nudge in nudges:
        minute = _minute(nudge.intended_at)
        rank = min(per_minute[minute], MAX_RANK)
        per_minute[minute] += 1
        ranked.append(
            transitions.NewNudge(
                nudge.kind, nudge.ref_id, nudge.intended_at, nudge.subject_starts_at, rank
            )
        )
    return ranked


@dataclass
class MaterializeReport:
    as_of: datetime
    users: int = 0
    queued: int = 0
    removed: int = 0
    overdue: int = 0
    capped_users: int = 0
    capped_nudges: int = 0
    disabled_users: int = 0
    failed_users: int = 0
    calendars_synced: int = 0
    calendars_unchanged: int = 0
    calendars_failed: int = 0
    calendars_needing_reauth: int = 0
    calendars_deferred: int = 0
    provider_calls: int = 0
    moved_earlier: int = 0
    # The run's budget ran out before every user was visited; the next run
    # starts after ``resume_after``.
    cut_short: bool = False
    resume_after: int = 0
    # Another run held the materialise lock: this one did nothing.
    overlapped: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Users queued so far in this process (``users`` counts those taken); for progress.
    visited: int = 0

    @property
    def ok(self) -> bool:
        return self.failed_users == 0

    def summary(self) -> str:
        if self.overlapped:
            return "materialize: another run is still in progress; this one did nothing"
        text = (
            f"materialize: users {self.users}, queued {self.queued}, removed {self.removed}, "
            f"calendars synced {self.calendars_synced} (unchanged {self.calendars_unchanged}, "
            f"failed {self.calendars_failed}), failed users {self.failed_users}, "
            f"moved earlier {self.moved_earlier} in {self.seconds:.1f}s"
        )
        if self.cut_short:
            text += f"; CUT SHORT by its budget, next run resumes after user {self.resume_after}"
        if self.capped_nudges:
            text += (
                f"; capped {self.capped_nudges} nudges of {self.capped_users} users "
                "(per-user limits)"
            )
        if self.overdue:
            text += f" — WARNING: {self.overdue} due rows are still unclaimed (is deliver running?)"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "as_of": self.as_of.isoformat(),
            "users": self.users,
            "queued": self.queued,
            "removed": self.removed,
            "capped_users": self.capped_users,
            "capped_nudges": self.capped_nudges,
            "disabled_users": self.disabled_users,
            "failed_users": self.failed_users,
            "provider_calls": self.provider_calls,
            "moved_earlier": self.moved_earlier,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            **MaterializeCounts(
                overdue_unclaimed=self.overdue,
                cut_short=self.cut_short,
                resume_after=self.resume_after,
                calendars_synced=self.calendars_synced,
                calendars_unchanged=self.calendars_unchanged,
                calendars_failed=self.calendars_failed,
                calendars_needing_reauth=self.calendars_needing_reauth,
                calendars_deferred=self.calendars_deferred,
            ).as_dict(),
        }


def users_to_visit(
    user_ids: Iterable[int] | None = None,
    *,
    share: int = 0,
    shares: int = 1,
    start_after: int = 0,
) -> Iterator[int]:
    """Active users by id, starting after ``start_after`` and wrapping round.

    With ``shares`` > 1 only those whose id falls in ``share``. Starting where
    a run cut short stopped means the same users are not the ones left out
    every time. The sweep's only unscoped read (``auth_user`` is not a tenant
    table).
    """
    users = get_user_model().objects.filter(is_active=True)
    if user_ids is not None:
        users = users.filter(pk__in=list(user_ids))
    if shares > 1:
        users = users.annotate(share=F("pk") % shares).filter(share=share)
    ids = users.order_by("pk").values_list("pk", flat=True)
    yield from ids.filter(pk__gt=start_after).iterator(chunk_size=2000)
    if start_after:
        yield from ids.filter(pk__lte=start_after).iterator(chunk_size=2000)


# The report fields that add up across parallel shares.
_ADDITIVE = (
    "users",
    "queued",
    "removed",
    "overdue",
    "capped_users",
    "capped_nudges",
    "disabled_users",
    "failed_users",
    "calendars_synced",
    "calendars_unchanged",
    "calendars_failed",
    "calendars_needing_reauth",
    "calendars_deferred",
    "provider_calls",
)


def materialize_share(
    now: datetime,
    *,
    config: NudgeConfig,
    user_ids: Iterable[int] | None = None,
    share: int = 0,
    shares: int = 1,
    start_after: int = 0,
    deadline: float | None = None,
    progress=None,
    sync_calendars: bool = True,
) -> MaterializeReport:
    """Visit one share of the users (all of them by default); no run log, no smoothing.

    Calendars are fetched many at once (``calendars.sync.SyncPool``): up to
    twice ``CALENDAR_SYNC_CONCURRENCY`` users are in the pool, and each is
    queued from the stored copy as soon as all of its connections are done, by
    the pool's database lanes, in the transaction of the user's last write.
    Stops taking users at ``deadline`` (monotonic), finishes those taken, and
    says where it stopped (``resume_after``), so the next run starts there
    instead of with the same users again.
    """
    report = MaterializeReport(as_of=now)
    window_start, window_end = config.subject_window(now)
    visit = functools.partial(_visit, report, now=now, config=config, progress=progress)
    pool = (
        SyncPool(
            now=now,
            window_start=window_start,
            window_end=window_end,
            config=config,
            deadline=deadline,
            then=functools.partial(queue_user_in_scope, now=now, config=config),
        )
        if sync_calendars
        else None
    )
    users = users_to_visit(user_ids, share=share, shares=shares, start_after=start_after)
    with pool or nullcontext():
        for user_id in users:
            if deadline is not None and time.monotonic() >= deadline:
                report.cut_short = True
                break
            report.resume_after = user_id
            report.users += 1
            if pool is None:
                visit(user_id, None)
                continue
            pool.add_user(user_id)
            full = pool.users_in_flight() >= 2 * pool.concurrency
            for done_id, summary in pool.finished(wait=full):
                visit(done_id, summary)
        for done_id, summary in pool.drain() if pool else ():
            visit(done_id, summary)
    return report


def _visit(
    report: MaterializeReport,
    user_id: int,
    synced: SyncSummary | None,
    *,
    now: datetime,
    config: NudgeConfig,
    progress=None,
) -> None:
    """Count one user queued from the stored copy: by the pool, in the transaction of
    their last synced calendar (``synced.after``), or here (calendars not synced)."""
    queued = None
    if synced is not None:
        _absorb_sync(report, synced)
        queued = synced.after
    try:
        if isinstance(queued, Exception):
            raise queued
        result = (
            queued if isinstance(queued, UserResult) else materialize_user(user_id, now, config)
        )
    except Exception as exc:
        _user_failed(report, user_id, exc)
        return
    report.queued += result.queued
    report.removed += result.removed
    report.overdue += result.overdue
    report.capped_users += bool(result.capped)
    report.capped_nudges += result.capped
    report.disabled_users += result.skipped_disabled
    report.visited += 1
    if progress and report.visited % 1000 == 0:
        progress(report)


def _user_failed(report: MaterializeReport, user_id: int, exc: Exception) -> None:
    report.failed_users += 1
    report.errors.append(f"user {user_id}: {type(exc).__name__}")
    logger.exception("materialize failed for one user", extra={"user_id": user_id})


def _share_in_child(now: datetime, share: int, shares: int, options: dict) -> dict:
    """A forked worker's share, as plain data for the parent."""
    connections.close_all()  # never use the parent's connection from a child
    try:
        report = materialize_share(now, share=share, shares=shares, **options)
    finally:
        connections.close_all()
    return {name: getattr(report, name) for name in (*_ADDITIVE, *_PER_SHARE)}


_PER_SHARE = ("errors", "cut_short", "resume_after")


def _in_parallel(now: datetime, workers: int, options: dict) -> MaterializeReport:
    """Each of ``workers`` forked processes visits the users whose id % workers is its own.

    Processes, not threads: a user's visit is Python work between short
    round trips, and a process per core is what makes it scale.
    """
    connections.close_all()  # a forked child must not inherit a live connection
    context = multiprocessing.get_context("fork")
    with context.Pool(workers) as pool:
        parts = pool.starmap(
            _share_in_child, [(now, share, workers, options) for share in range(workers)]
        )
    report = MaterializeReport(as_of=now)
    for part in parts:
        for name in _ADDITIVE:
            setattr(report, name, getattr(report, name) + part[name])
        report.errors.extend(part["errors"])
    cut = [part["resume_after"] for part in parts if part["cut_short"]]
    if cut:
        # Shares advance together; resuming after the least advanced one
        # revisits a few users rather than skipping any.
        report.cut_short, report.resume_after = True, min(cut)
    return report


def _resume_point() -> int:
    """Where the last run stopped, if its budget cut it short; else 0 (from the start)."""
    last = (
        SweepRun.objects.filter(sweep=SweepRun.Sweep.MATERIALIZE)
        .exclude(status=SweepRun.Status.RUNNING)
        .order_by("-started_at", "-pk")
        .values_list("counts", flat=True)
        .first()
    )
    counts = MaterializeCounts.from_counts(last)
    return counts.resume_after if counts.cut_short else 0


@contextmanager
def _run_lock() -> Iterator[bool]:
    """Whether this run holds the materialise lock (one run at a time, cluster-wide).

    A session-level advisory lock on a connection of its own, held for the
    whole run and released when that connection closes, even if the process
    dies: a run that overlaps a slow one does nothing instead of piling up.
    """
    holder = connection.get_new_connection(connection.get_connection_params())
    try:
        holder.autocommit = True
        acquired = bool(holder.execute(statements.TRY_MATERIALIZE_LOCK).fetchone()[0])
        yield acquired
        if acquired:
            holder.execute(statements.MATERIALIZE_UNLOCK)
    finally:
        holder.close()


def run_materialize(
    now: datetime | None = None,
    *,
    user_ids: Iterable[int] | None = None,
    progress=None,
    sync_calendars: bool = True,
    workers: int = 1,
) -> MaterializeReport:
    """Materialise every active user's nudges for the look-ahead, then smooth bursts.

    One user's failure is logged and counted and the sweep goes on.
    ``progress``, if given, is called with the report every 1,000 users (one
    process only). ``workers`` > 1 splits the users over that many processes.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    config = NudgeConfig.from_settings()
    started = time.monotonic()
    now = now or database_now()
    with _run_lock() as acquired:
        if not acquired:
            return MaterializeReport(as_of=now, overlapped=True)
        return _locked_run(now, config, started, user_ids, progress, sync_calendars, workers)


def _locked_run(now, config, started, user_ids, progress, sync_calendars, workers):
    with recorded_run(SweepRun.Sweep.MATERIALIZE, now) as run:
        options = {
            "user_ids": list(user_ids) if user_ids is not None else None,
            "start_after": 0 if user_ids is not None else _resume_point(),
            "deadline": started + config.materialize_budget_seconds,
            "sync_calendars": sync_calendars,
            "config": config,
        }
        if workers > 1:
            report = _in_parallel(now, workers, options)
        else:
            report = materialize_share(now, progress=progress, **options)
        report.moved_earlier = smooth_bursts(now, config)
        report.seconds = time.monotonic() - started
        run.counts = report.as_dict()
        run.summary = report.summary()[:255]
        if not report.ok:
            run.status = SweepRun.Status.FAILED
            run.error = "; ".join(report.errors[:20])
    return report


def _absorb_sync(report: MaterializeReport, summary: SyncSummary) -> None:
    report.calendars_synced += summary.synced
    report.calendars_unchanged += summary.unchanged
    report.calendars_failed += summary.failed
    report.calendars_needing_reauth += summary.needs_reauth
    report.calendars_deferred += summary.deferred
    report.provider_calls += summary.provider_calls
