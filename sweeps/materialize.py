"""The materializing sweep (cron: every 15 minutes).

Work moves earlier: once per run, for each user, sync their calendars and
write one ``scheduled_sends`` row per nudge due within the look-ahead, so
that delivery is a single indexed claim rather than a per-tenant scan.

Everything about a user happens inside that user's ``tenant_scope``; the only
unscoped read is the list of users to visit (``auth_user`` is not a tenant
table). The bypass is never used here.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import multiprocessing
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import repeat

from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.db.models import BooleanField, ExpressionWrapper, F, QuerySet
from django.utils import timezone

from accounts.models import DeliverySettings
from accounts.rules import SkipReason, hold_for_quiet_hours, pause_reason
from calendars.models import CalendarEvent, ConnectionStatus, EventStatus
from calendars.providers.normalize import sorted_leads
from calendars.sync import SyncPool, SyncSummary, sync_user_connections
from core.config import NudgeConfig
from followups.models import FollowUp
from followups.repeat import is_due_at, occurrences
from pacing.pacer import rates_in_force
from scheduled_sends.models import Kind, MaterializeCycle, NudgeAct, ScheduledSend, SweepRun
from scheduled_sends.queue import statements, states, transitions
from scheduled_sends.queue.transitions import database_now
from scheduled_sends.runlog import MaterializeCounts, add_outcomes, outlived_after, recorded_run
from scheduled_sends.subjects import event_skip_reason, follow_up_skip_reason
from sweeps import cycle as shared_cycle
from sweeps.smoothing import smooth_bursts
from tenancy.scope import planning_scope, tenant_scope

logger = logging.getLogger("nudge.materialize")

# Users planned and queued together (one ``planning_scope`` transaction): enough
# that a statement's cost is spread thin, few enough that a failed set, planned
# again one user at a time, costs a second or two.
PLANNED_TOGETHER = 200


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


def _leads(
    reminder_minutes: Iterable[int], default_lead: timedelta, config: NudgeConfig
) -> list[timedelta]:
    """The subject's own distinct leads, else the default: at most MAX_LEADS_PER_EVENT.

    Beyond the cap comes at the cap (ARCHITECTURE, "Reminders"); 0 is "at the time".
    The sync and the follow-up forms already keep to this; rows written another
    way (imports, the admin) are held to the same rule here.
    """
    max_minutes = int(config.max_lead.total_seconds() // 60)
    minutes = {min(m, max_minutes) for m in reminder_minutes if m >= 0}
    return [timedelta(minutes=m) for m in sorted_leads(minutes)] or [default_lead]


def plan_event_nudges(
    events: Iterable[CalendarEvent],
    default_lead: timedelta,
    now: datetime,
    config: NudgeConfig,
    hold: IntendedTimeRule = None,
) -> list[PlannedNudge]:
    """One nudge per distinct reminder lead of each event, else the user's default.

    The event's calendar switches come as the annotations ``plan_for_user``
    reads with it (``calendar_nudges_on``, ``calendar_skips_all_day``); an event
    without them is on a calendar with the defaults.
    """
    planned = []
    for event in events:
        skip = event_skip_reason(
            found=True,
            cancelled=event.status == EventStatus.CANCELLED,
            declined=event.declined,
            all_day=event.all_day,
            needs_reauth=False,  # those connections' events are not read (plan_for_user)
            calendar_off=not getattr(event, "calendar_nudges_on", True),
            skip_all_day=getattr(event, "calendar_skips_all_day", True),
        )
        if skip:
            continue
        for lead in _leads(event.reminder_minutes, default_lead, config):
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
    """Each occurrence of a follow-up is nudged each of its own leads before it
    (else the user's default lead): one row per (occurrence, lead).

    A repeating follow-up's occurrences are found in the subject window
    (followups.repeat, on the follow-up's own wall clock); when two of them
    want the same instant (a daily one with leads of 0 and a day) the nearer
    subject keeps it, as the queue's key allows one row per instant.
    """
    planned: dict[tuple[str, int, datetime], PlannedNudge] = {}
    start, end = config.subject_window(now)
    for follow_up in follow_ups:
        if follow_up_skip_reason(found=True, done=follow_up.done):
            continue
        leads = _leads(follow_up.reminder_minutes, default_lead, config)
        due_times = occurrences(
            follow_up.due_at,
            follow_up.repeat,
            follow_up.repeat_weekdays,
            follow_up.repeat_zone,
            start,
            end,
        )
        for due_at in due_times:
            for lead in leads:
                intended_at = _held(hold, due_at - lead, due_at)
                nudge = PlannedNudge(Kind.FOLLOW_UP, follow_up.pk, intended_at, due_at)
                if _in_window(intended_at, now, config) and nudge.key not in planned:
                    planned[nudge.key] = nudge
    return list(planned.values())


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


@dataclass
class UserSubjects:
    """What planning reads about one user: their settings, the subjects in the window,
    their live snoozes, and their rows already queued."""

    delivery: DeliverySettings | None = None
    events: list[CalendarEvent] = field(default_factory=list)
    follow_ups: list[FollowUp] = field(default_factory=list)
    snoozes: list[tuple] = field(default_factory=list)
    pending: list[tuple] = field(default_factory=list)


@dataclass(frozen=True)
class SubjectReads:
    """The reads planning makes, one statement each however many users it plans.

    Runs in whichever scope is open: a user's ``tenant_scope`` (one user) or
    ``planning_scope`` (a slice of them); the plan tests EXPLAIN these querysets.
    """

    settings: QuerySet
    events: QuerySet
    follow_ups: QuerySet
    snoozes: QuerySet
    pending: QuerySet

    @classmethod
    def of(cls, user_ids: list[int], now: datetime, config: NudgeConfig) -> SubjectReads:
        start, end = config.subject_window(now)
        # One read of follow-ups, each half on its own partial index: a one-off due in the
        # window, and a repeating one that has begun by its end (followups.repeat).
        open_follow_ups = FollowUp.objects.filter(user_id__in=user_ids, done=False, due_at__lte=end)
        return cls(
            # A deactivated user is planned nothing (their pending rows are withdrawn).
            settings=DeliverySettings.objects.filter(user_id__in=user_ids, user__is_active=True),
            events=CalendarEvent.objects.filter(
                user_id__in=user_ids, starts_at__gt=start, starts_at__lte=end
            )
            .exclude(connection__status=ConnectionStatus.NEEDS_REAUTH)
            .annotate(
                calendar_nudges_on=F("connection__nudges_on"),
                calendar_skips_all_day=F("connection__skip_all_day"),
            ),
            follow_ups=open_follow_ups.filter(repeat="", due_at__gt=start)
            .order_by()
            .union(open_follow_ups.exclude(repeat="").order_by(), all=True),
            snoozes=NudgeAct.objects.filter(
                user_id__in=user_ids,
                act=NudgeAct.Act.SNOOZE,
                snoozed_until__gt=now - config.grace,
                snoozed_until__lte=now + config.lookahead,
            ).values_list("user_id", "kind", "ref_id", "snoozed_until", "subject_starts_at"),
            # Overdue: evidence that delivery is not happening, read in the owner's
            # scope so a broken bypass cannot hide it (see health.py).
            pending=ScheduledSend.objects.filter(
                states.unsettled(), states.inside_grace(now, config.grace), user_id__in=user_ids
            )
            .annotate(
                overdue=ExpressionWrapper(
                    states.overdue_unclaimed(now, config.grace, config.overdue_after),
                    output_field=BooleanField(),
                )
            )
            .values_list(
                "user_id", "id", "kind", "ref_id", "intended_at", "fire_at", "claimed_at", "overdue"
            ),
        )


def read_subjects(
    user_ids: list[int], now: datetime, config: NudgeConfig
) -> dict[int, UserSubjects]:
    """Everything planning ``user_ids`` needs, in at most five statements for them all."""
    reads = SubjectReads.of(user_ids, now, config)
    subjects = {user_id: UserSubjects() for user_id in user_ids}
    for delivery in reads.settings:
        subjects[delivery.user_id].delivery = delivery
    planned = [u for u, s in subjects.items() if _nudges_on(s.delivery)]
    if planned:
        narrowed = SubjectReads.of(planned, now, config) if len(planned) < len(user_ids) else reads
        for event in narrowed.events:
            subjects[event.user_id].events.append(event)
        for follow_up in narrowed.follow_ups:
            subjects[follow_up.user_id].follow_ups.append(follow_up)
        for user_id, *snooze in narrowed.snoozes:
            subjects[user_id].snoozes.append(tuple(snooze))
    for user_id, *row in reads.pending:
        subjects[user_id].pending.append(tuple(row))
    return subjects


def _nudges_on(delivery: DeliverySettings | None) -> bool:
    return delivery is not None and delivery.enabled and pause_reason(delivery) is None


def plan_for_user(
    subjects: UserSubjects, now: datetime, config: NudgeConfig
) -> list[PlannedNudge] | None:
    """The nudges the user should have queued now; None when nudges are off. No I/O."""
    delivery = subjects.delivery
    if not _nudges_on(delivery):
        return None
    default_lead = timedelta(minutes=delivery.default_lead_minutes)
    hold = functools.partial(hold_for_quiet_hours, settings=delivery)
    planned = plan_event_nudges(subjects.events, default_lead, now, config, hold)
    planned += plan_follow_up_nudges(subjects.follow_ups, default_lead, now, config, hold)
    return planned + plan_snoozed_nudges(
        subjects.snoozes, subjects.events, subjects.follow_ups, now, config, hold
    )


def plan_snoozed_nudges(
    snoozes: Iterable[tuple],
    events: Iterable[CalendarEvent],
    follow_ups: Iterable[FollowUp],
    now: datetime,
    config: NudgeConfig,
    hold: IntendedTimeRule = None,
) -> list[PlannedNudge]:
    """The nudges the user's Snooze taps asked for (``nudge_actions``), still ahead.

    ``snoozes`` are (kind, ref_id, snoozed_until, subject_starts_at). Planned
    like any other, so they count against the caps and are not withdrawn as
    unplanned; a snooze lapses when its subject moved, went or was done.
    """
    starts = {
        (Kind.EVENT, event.pk): event.starts_at
        for event in events
        if not event_skip_reason(
            found=True,
            cancelled=event.status == EventStatus.CANCELLED,
            declined=event.declined,
            all_day=event.all_day,
            needs_reauth=False,  # not read (SubjectReads)
            calendar_off=not event.calendar_nudges_on,
            skip_all_day=event.calendar_skips_all_day,
        )
    }
    open_follow_ups = {follow_up.pk: follow_up for follow_up in follow_ups}
    planned = []
    for kind, ref_id, until, starts_at in snoozes:
        if kind == Kind.FOLLOW_UP:
            if not is_due_at(open_follow_ups.get(ref_id), starts_at):
                continue
        elif starts.get((kind, ref_id)) != starts_at:
            continue
        intended_at = _held(hold, until, starts_at)
        if _in_window(intended_at, now, config):
            planned.append(PlannedNudge(kind, ref_id, intended_at, starts_at))
    return planned


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


@dataclass
class PlannedSet:
    """Each user's result (or the exception that was their result), and, when the set
    could not be planned together, why: its users were then planned one at a time."""

    results: dict[int, UserResult | Exception]
    planned_alone_because: str = ""


def materialize_users(user_ids: list[int], now: datetime, config: NudgeConfig) -> PlannedSet:
    """``materialize_user`` for a set of users, planned and queued together.

    One ``planning_scope`` transaction and a statement per step for all of
    them; if it fails, each user again in their own scope, so one user's bad
    row costs that user alone. Said, not hidden: the run log counts such sets
    (a planner role the bootstrap never made would otherwise only be slow).
    """
    try:
        with planning_scope(user_ids):
            return PlannedSet(dict(queue_users_in_scope(user_ids, now, config)))
    except Exception as exc:
        logger.warning("planning a set of users failed; each is planned alone", exc_info=True)
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    results: dict[int, UserResult | Exception] = {}
    for user_id in user_ids:
        try:
            results[user_id] = materialize_user(user_id, now, config)
        except Exception as exc:
            results[user_id] = exc
    return PlannedSet(results, planned_alone_because=why)


def queue_user_in_scope(user_id: int, now: datetime, config: NudgeConfig) -> UserResult:
    """``materialize_user`` inside the user's scope, already open."""
    return queue_users_in_scope([user_id], now, config)[user_id]


def queue_users_in_scope(
    user_ids: list[int], now: datetime, config: NudgeConfig
) -> dict[int, UserResult]:
    """Plan ``user_ids`` and bring their queue in line, inside the scope already open
    (``tenant_scope`` of the one user, or ``planning_scope`` of them all)."""
    subjects = read_subjects(user_ids, now, config)
    results: dict[int, UserResult] = {}
    stale_ids: list[int] = []
    to_queue: list[tuple[int, str, transitions.NewNudge]] = []
    for user_id in user_ids:
        result = results[user_id] = UserResult()
        user = subjects[user_id]
        planned = plan_for_user(user, now, config)
        result.skipped_disabled = planned is None
        planned, result.capped = cap_per_user(planned or [], config)
        if user.delivery is not None and user.delivery.capped_nudges != result.capped:
            DeliverySettings.objects.filter(pk=user.delivery.pk).update(
                capped_nudges=result.capped, capped_at=now if result.capped else None
            )
        wanted = {nudge.key: nudge for nudge in planned}
        per_minute: Counter[datetime] = Counter()  # this user's queued rows per send minute
        for row_id, kind, ref_id, intended_at, fire_at, claimed_at, overdue in user.pending:
            if (kind, ref_id, intended_at) in wanted:
                wanted.pop((kind, ref_id, intended_at))
                per_minute[_minute(fire_at)] += 1
                result.overdue += overdue
            elif claimed_at is None:
                stale_ids.append(row_id)
        # Still in cap_per_user's order (earliest first), which the ranks follow.
        to_insert = [nudge for nudge in wanted.values() if nudge.worth_queueing(now)]
        channel = user.delivery.channel if user.delivery else ""
        to_queue += [(user_id, channel, row) for row in _ranked(to_insert, per_minute)]
    for user_id, removed in transitions.withdraw_unclaimed(stale_ids).items():
        results[user_id].removed = removed
    for user_id, queued in transitions.enqueue_many(to_queue).items():
        results[user_id].queued = queued
    return results


def refresh_queue(user_id: int, now: datetime | None = None, **_signal_kwargs: object) -> None:
    """Re-materialize one user now, so a change does not wait for the next sweep.

    Called after a user's own change (a follow-up, a link, a calendar) and, as
    the receiver of ``accounts.signals.plan_changed``, after their
    settings changed. A failure is logged, not raised: the change itself is
    saved, and the next sweep catches up.
    """
    try:
        materialize_user(user_id, now or timezone.now(), NudgeConfig.from_settings())
    except Exception:
        logger.exception(
            "re-materializing a user after a change failed", extra={"user_id": user_id}
        )


def refresh_calendars_and_queue(user_id: int, now: datetime | None = None) -> None:
    """Sync the user's calendars, then re-materialize them: a new connection's
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
        rank = min(per_minute[minute], transitions.MAX_RANK)
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
    # provider -> sync outcome -> calendars (calendars.sync.Outcome), for /metrics.
    calendar_outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    # Shared budget -> requests a second in force as the run ended (a 429 lowers it).
    rates: dict[str, float] = field(default_factory=dict)
    moved_earlier: int = 0
    # Sets of users that could not be planned together (materialize_users) and why.
    sets_planned_alone: int = 0
    planned_alone_because: str = ""
    # The run's budget ran out before every user was visited; the next run
    # starts after ``resume_after``.
    cut_short: bool = False
    resume_after: int = 0
    # Another run held the materialize lock: this one did nothing.
    overlapped: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Users queued so far in this process (``users`` counts those taken); for progress.
    visited: int = 0
    # A shared cycle (sweeps/cycle.py): its slot, and this run's part in it.
    cycle: datetime | None = None
    cycle_was_complete: bool = False  # found done on arrival: this run did nothing
    participants: int = 0
    # Who this run is in the cycle (host:pid, as slices name their holder).
    participant: str = ""
    slices_taken: int = 0
    slices_taken_over: int = 0
    cycle_slices: int = 0
    cycle_slices_done: int = 0

    @property
    def ok(self) -> bool:
        return self.failed_users == 0

    def summary(self) -> str:
        if self.overlapped:
            return "materialize: another run is still in progress; this one did nothing"
        if self.cycle_was_complete:
            return (
                f"materialize: cycle {self.cycle:%H:%M}Z is already complete "
                f"({_counted(self.cycle_slices, 'slice')}, "
                f"{_counted(self.participants, 'participant')}); "
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
                f"; cycle {self.cycle:%H:%M}Z: took {_counted(self.slices_taken, 'slice')}"
                f" ({self.slices_taken_over} taken over), {self.cycle_slices_done}"
                f"/{self.cycle_slices} done, {_counted(self.participants, 'participant')}"
            )
        if self.cut_short and self.cycle is not None:
            text += "; CUT SHORT by its budget, the next cycle starts with the slices left"
        elif self.cut_short:
            text += f"; CUT SHORT by its budget, next run resumes after user {self.resume_after}"
        if self.rates:
            text += "; rate " + ", ".join(f"{b} {r:.1f}/s" for b, r in sorted(self.rates.items()))
        if self.capped_nudges:
            text += (
                f"; capped {self.capped_nudges} nudges of {self.capped_users} users "
                "(per-user limits)"
            )
        if self.sets_planned_alone:
            text += (
                f" — WARNING: {_counted(self.sets_planned_alone, 'set')} of users could not "
                f"be planned together; each user was planned alone ({self.planned_alone_because})"
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
            "sets_planned_alone": self.sets_planned_alone,
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
                calendar_outcomes=self.calendar_outcomes,
                rates={budget: round(rate, 2) for budget, rate in self.rates.items()},
                cycle=self.cycle.isoformat() if self.cycle else "",
                participants=self.participants,
                participant=self.participant,
                slices_taken=self.slices_taken,
                slices_taken_over=self.slices_taken_over,
                cycle_slices=self.cycle_slices,
                cycle_slices_done=self.cycle_slices_done,
            ).as_dict(),
        }


def _counted(count: int, noun: str) -> str:
    """'1 slice', '3 slices': the run log is read by people."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def users_to_visit(
    user_ids: Iterable[int] | None = None,
    *,
    share: int = 0,
    shares: int = 1,
    start_after: int = 0,
    after_id: int = 0,
    up_to: int | None = None,
) -> Iterator[int]:
    """Active users by id, starting after ``start_after`` and wrapping round.

    With ``shares`` > 1 only those whose id falls in ``share``; with
    ``after_id``/``up_to`` only those in that range (a cycle's slice). Starting
    where a run cut short stopped means the same users are not the ones left
    out every time. The sweep's only unscoped read (``auth_user`` is not a
    tenant table).
    """
    users = get_user_model().objects.filter(is_active=True, pk__gt=after_id)
    if up_to is not None:
        users = users.filter(pk__lte=up_to)
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
    "sets_planned_alone",
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

    Stops taking users at ``deadline`` (monotonic), finishes those taken, and
    says where it stopped (``resume_after``), so the next run starts there
    instead of with the same users again.
    """
    report = MaterializeReport(as_of=now)
    flow = UserFlow(report, config, deadline=deadline, sync=sync_calendars, progress=progress)
    with flow:
        users = users_to_visit(user_ids, share=share, shares=shares, start_after=start_after)
        for user_id in users:
            if deadline is not None and time.monotonic() >= deadline:
                report.cut_short = True
                break
            report.resume_after = user_id
            flow.add(user_id)
        flow.finish()
    return report


class UserFlow:
    """Users on their way through a run: calendars synced many at a time
    (``calendars.sync.SyncPool``, up to twice ``CALENDAR_SYNC_CONCURRENCY``
    users in it), then planned and queued from the stored copy
    ``PLANNED_TOGETHER`` at a time (``materialize_users``), a statement per
    step for the lot.

    One flow serves every slice a process takes in a cycle, each user tagged
    with its slice: the next slice's fetches start while the last ones of the
    slice before are still out. (A pool per slice drained at each slice's end;
    at 250 users a slice, a third of a calendar-syncing run was that drain.)
    A tag is settled once every user of it is planned.
    """

    def __init__(
        self,
        report: MaterializeReport,
        config: NudgeConfig,
        *,
        deadline: float | None,
        sync: bool = True,
        progress=None,
    ) -> None:
        self.report, self.config, self.progress = report, config, progress
        window_start, window_end = config.subject_window(report.as_of)
        self.pool = (
            SyncPool(
                now=report.as_of,
                window_start=window_start,
                window_end=window_end,
                config=config,
                deadline=deadline,
            )
            if sync
            else None
        )
        self._ready: list[tuple[int, SyncSummary | None]] = []  # synced (or not syncing)
        self._tag_of: dict[int, object] = {}
        self._unplanned: Counter[object] = Counter()  # tag -> its users not planned yet
        self._closed: list[object] = []  # tags with every user added, not reported yet
        # Sets handed to the planner thread, oldest first, with what they will answer.
        self._planning: deque[tuple[list[tuple[int, SyncSummary | None]], Future]] = deque()
        self._planner: ThreadPoolExecutor | None = None

    def __enter__(self) -> UserFlow:
        if self.pool is not None:
            self.pool.__enter__()
        if self.pool is not None and not connection.in_atomic_block:
            # Planning on a thread (and connection) of its own, so the run's thread
            # goes on starting fetches while a set is planned. Not inside a
            # transaction the flow does not own (a test's): another connection
            # could not see its rows.
            self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._planner is not None:
                self._planner.submit(connections.close_all)  # the planner's own connection
                self._planner.shutdown(wait=True)
        finally:
            if self.pool is not None:
                self.pool.__exit__(*exc)

    def add(self, user_id: int, tag: object = None) -> None:
        """Take a user in; waits only while the pool is full, planning whoever is ready."""
        self.report.users += 1
        self._tag_of[user_id] = tag
        self._unplanned[tag] += 1
        if self.pool is None:
            self._ready.append((user_id, None))
        else:
            self._ready.extend(self.pool.admit(user_id))
        self._plan(PLANNED_TOGETHER)

    def close(self, tag: object) -> None:
        """No more users for ``tag``."""
        self._closed.append(tag)

    def settled(self) -> list[object]:
        """Closed tags whose every user is planned, not reported before; never waits.

        A closed tag whose remaining users are all synced is planned now, in a
        set smaller than ``PLANNED_TOGETHER`` if need be, so its slice can be
        marked done without waiting for the next slice's users to fill a set.
        """
        if self.pool is not None:
            self._ready.extend(self.pool.finished())
        self._count_planned(wait_for=0)
        # Synced and not yet in a set, or in a set the planner has not answered yet.
        on_the_way = Counter(self._tag_of[user_id] for user_id, _ in self._ready)
        if not any(on_the_way[tag] for tag in self._closed):
            return self._report_settled()
        for ready, _future in self._planning:
            on_the_way.update(self._tag_of[user_id] for user_id, _ in ready)
        if any(on_the_way[tag] == self._unplanned[tag] > 0 for tag in self._closed):
            self._plan(1)
            self._count_planned(wait_for=0)
        return self._report_settled()

    def finish(self) -> list[object]:
        """Wait for every user taken in and plan them; the closed tags not reported before."""
        if self.pool is not None:
            self._ready.extend(self.pool.drain())
        self._plan(1)
        self._count_planned(wait_for=len(self._planning))
        return self._report_settled()

    def _report_settled(self) -> list[object]:
        done = [tag for tag in self._closed if not self._unplanned[tag]]
        self._closed = [tag for tag in self._closed if self._unplanned[tag]]
        return done

    def _plan(self, at_least: int) -> None:
        if not self._ready or len(self._ready) < at_least:
            return
        ready, self._ready = self._ready, []
        if self._planner is None:
            self._counted(ready, _plan_set(ready, self.config, self.report.as_of))
            return
        self._planning.append(
            (ready, self._planner.submit(_plan_set, ready, self.config, self.report.as_of))
        )
        # At most one set waits behind the one being planned: the rest wait as users.
        self._count_planned(wait_for=len(self._planning) - 2)

    def _count_planned(self, *, wait_for: int) -> None:
        """Count the sets the planner is done with, oldest first, waiting for the
        oldest ``wait_for`` of them to be done."""
        while self._planning and (wait_for > 0 or self._planning[0][1].done()):
            ready, future = self._planning.popleft()
            self._counted(ready, future.result())
            wait_for -= 1

    def _counted(self, ready: list[tuple[int, SyncSummary | None]], planned: PlannedSet) -> None:
        _count_set(self.report, ready, planned, self.progress)
        for user_id, _ in ready:
            self._unplanned[self._tag_of.pop(user_id)] -= 1


def _plan_set(
    ready: list[tuple[int, SyncSummary | None]], config: NudgeConfig, now: datetime
) -> PlannedSet:
    """Plan and queue users together from the stored copy (``materialize_users``); a user
    whose calendars could not even be read is left out (counted failed)."""
    readable = [user_id for user_id, synced in ready if not _unreadable(synced)]
    return materialize_users(readable, now, config) if readable else PlannedSet({})


def _count_set(
    report: MaterializeReport,
    ready: list[tuple[int, SyncSummary | None]],
    planned: PlannedSet,
    progress=None,
) -> None:
    """Count a planned set's users into the report (on the run's own thread)."""
    results = planned.results
    if planned.planned_alone_because:
        report.sets_planned_alone += 1
        report.planned_alone_because = planned.planned_alone_because
    for user_id, synced in ready:
        if synced is not None:
            _absorb_sync(report, synced)
        result = synced.unreadable if _unreadable(synced) else results[user_id]
        if isinstance(result, Exception):
            _user_failed(report, user_id, result)
            continue
        report.queued += result.queued
        report.removed += result.removed
        report.overdue += result.overdue
        report.capped_users += bool(result.capped)
        report.capped_nudges += result.capped
        report.disabled_users += result.skipped_disabled
        report.visited += 1
        if progress and report.visited % 1000 == 0:
            progress(report)


def _unreadable(synced: SyncSummary | None) -> bool:
    return synced is not None and synced.unreadable is not None


def _user_failed(report: MaterializeReport, user_id: int, exc: Exception) -> None:
    report.failed_users += 1
    report.errors.append(f"user {user_id}: {type(exc).__name__}")
    logger.exception("materialize failed for one user", extra={"user_id": user_id})


def _share_in_child(now: datetime, share: int, shares: int, options: dict) -> dict:
    """A forked worker's share, as plain data for the parent.

    In a shared cycle every worker is one more participant claiming slices;
    otherwise it visits the users whose id % shares is its own.
    """
    connections.close_all()  # never use the parent's connection from a child
    try:
        if options.get("cycle") is not None:
            report = _cycle_share(**options)
        else:
            report = materialize_share(now, share=share, shares=shares, **options)
    finally:
        connections.close_all()
    return {name: getattr(report, name) for name in (*_ADDITIVE, *_PER_SHARE)}


_PER_SHARE = (
    "errors",
    "calendar_outcomes",
    "cut_short",
    "resume_after",
    "slices_taken",
    "slices_taken_over",
    "planned_alone_because",
)


def _in_parallel(now: datetime, workers: int, options: dict) -> MaterializeReport:
    """``workers`` forked processes: participants of the shared cycle, or shares by user id.

    Processes, not threads: a user's visit is Python work between short
    round trips, and a process per core is what makes it scale. Not a
    ``multiprocessing.Pool``: its workers are daemonic and may not have
    children (each feed's parse once was one); each fork starts its own parse
    template (``calendars/providers/parse_template.py``). The command's
    calendar concurrency, per-host cap and database lanes are shared out among
    the forks, so ``--workers N`` holds as many server connections as one
    process (each fetch thread keeps one for the shared pacing), not N times as
    many, and one feed host still gets at most ``CALENDAR_SYNC_PER_HOST`` at once.
    """
    connections.close_all()  # a forked child must not inherit a live connection
    config: NudgeConfig = options["config"]
    options = {
        **options,
        "config": dataclasses.replace(
            config,
            calendar_sync_concurrency=max(1, config.calendar_sync_concurrency // workers),
            calendar_sync_per_host=max(1, config.calendar_sync_per_host // workers),
            calendar_sync_db_lanes=max(1, config.calendar_sync_db_lanes // workers),
        ),
    }
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        parts = list(
            pool.map(
                _share_in_child,
                repeat(now),
                range(workers),
                repeat(workers),
                repeat(options),
            )
        )
    report = MaterializeReport(as_of=now)
    for part in parts:
        for name in (*_ADDITIVE, "slices_taken", "slices_taken_over"):
            setattr(report, name, getattr(report, name) + part[name])
        report.errors.extend(part["errors"])
        add_outcomes(report.calendar_outcomes, part["calendar_outcomes"])
        report.planned_alone_because = report.planned_alone_because or part["planned_alone_because"]
    cut = [part["resume_after"] for part in parts if part["cut_short"]]
    if cut:
        # Shares advance together; resuming after the least advanced one
        # revisits a few users rather than skipping any.
        report.cut_short, report.resume_after = True, min(cut)
    return report


def _cycle_share(
    cycle: MaterializeCycle,
    config: NudgeConfig,
    deadline: float,
    sync_calendars: bool = True,
    progress=None,
) -> MaterializeReport:
    """This process's part of a shared cycle: slices claimed and visited until none is left,
    every slice's users through one ``UserFlow``."""
    report = MaterializeReport(as_of=cycle.as_of)
    with UserFlow(
        report, config, deadline=deadline, sync=sync_calendars, progress=progress
    ) as flow:
        visitor = _SliceVisitor(flow, deadline)
        taking_part = shared_cycle.take_part(cycle, config, visitor, deadline=deadline)
    report.cut_short = taking_part.cut_short
    report.slices_taken = taking_part.slices_taken
    report.slices_taken_over = taking_part.slices_taken_over
    return report


class _SliceVisitor:
    """A cycle's slices through one flow (``shared_cycle.SliceVisitor``)."""

    def __init__(self, flow: UserFlow, deadline: float) -> None:
        self.flow, self.deadline = flow, deadline
        self.unsettled: list[shared_cycle.Visit] = []

    def start(self, visit: shared_cycle.Visit) -> None:
        for user_id in users_to_visit(after_id=visit.taken.after_id, up_to=visit.taken.up_to):
            if time.monotonic() >= self.deadline:
                visit.whole = False
                break
            # The slices before, whose last users are still out, keep their leases too.
            for earlier in self.unsettled:
                earlier.lease.keep()
            if not visit.lease.keep():
                visit.whole = False
                break
            self.flow.add(user_id, visit)
            visit.users += 1
        self.flow.close(visit)
        self.unsettled.append(visit)

    def settled(self) -> list[shared_cycle.Visit]:
        return self._forget(self.flow.settled())

    def finish(self) -> list[shared_cycle.Visit]:
        return self._forget(self.flow.finish())

    def _forget(self, done: list[object]) -> list[shared_cycle.Visit]:
        visits = [visit for visit in self.unsettled if visit in done]
        self.unsettled = [visit for visit in self.unsettled if visit not in done]
        return visits


def _resume_point() -> int:
    """Where the last run stopped, if its budget cut it short; else 0 (from the start).

    For runs of named users and direct calls; a shared cycle starts where the
    previous cycle's slices stopped (``cycle.join_cycle``).
    """
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
    """Whether this run holds the materialize lock (one direct run at a time, cluster-wide).

    Only for runs outside a shared cycle (named users, direct calls): a
    session-level advisory lock on a connection of its own, held for the
    whole run and released when that connection closes, even if the process
    dies. Shared-cycle runs take no such lock: they join the cycle instead.
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
    shared: bool = False,
) -> MaterializeReport:
    """Materialize every active user's nudges for the look-ahead, then smooth bursts.

    One user's failure is logged and counted and the sweep goes on.
    ``progress``, if given, is called with the report every 1,000 users (one
    process only). ``workers`` > 1 splits the users over that many processes.
    ``shared`` (the cron command) joins the cycle of ``now`` with every other
    process running it, on any machine (``sweeps/cycle.py``); a
    cycle already complete is not run again.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    config = NudgeConfig.from_settings()
    started = time.monotonic()
    now = now or database_now()
    if shared and user_ids is None:
        return _shared_run(now, config, started, progress, sync_calendars, workers)
    with _run_lock() as acquired:
        if not acquired:
            return MaterializeReport(as_of=now, overlapped=True)
        return _locked_run(now, config, started, user_ids, progress, sync_calendars, workers)


def _shared_run(now, config, started, progress, sync_calendars, workers) -> MaterializeReport:
    """Take part in the cycle of ``now``; a complete cycle is reported, not recorded or run."""
    cycle = shared_cycle.join_cycle(now, config)
    state = shared_cycle.cycle_state(cycle.starts_at, config)
    if state.complete:
        report = MaterializeReport(as_of=cycle.as_of, cycle_was_complete=True)
        _absorb_cycle_state(report, cycle, state)
        return report
    with recorded_run(
        SweepRun.Sweep.MATERIALIZE,
        cycle.as_of,
        outlived=outlived_after(config.materialize_budget_seconds),
    ) as run:
        options = {
            "cycle": cycle,
            "config": config,
            "deadline": started + config.materialize_budget_seconds,
            "sync_calendars": sync_calendars,
        }
        if workers > 1:
            report = _in_parallel(cycle.as_of, workers, options)
        else:
            report = _cycle_share(progress=progress, **options)
        _absorb_cycle_state(report, cycle, shared_cycle.cycle_state(cycle.starts_at, config))
        report.participant = shared_cycle.participant_name()
        if workers > 1:
            report.participant += f" and its {workers} forks"
        # Smoothing from this participant's own instant, not the cycle's: a
        # late joiner must not move rows into minutes already being delivered.
        _finish_run(run, report, config, started, smooth_at=max(now, cycle.as_of))
    return report


def _absorb_cycle_state(
    report: MaterializeReport, cycle: MaterializeCycle, state: shared_cycle.CycleState
) -> None:
    report.cycle = cycle.starts_at
    report.participants = state.participants
    report.cycle_slices = state.slices
    report.cycle_slices_done = state.done


def _locked_run(now, config, started, user_ids, progress, sync_calendars, workers):
    with recorded_run(
        SweepRun.Sweep.MATERIALIZE, now, outlived=outlived_after(config.materialize_budget_seconds)
    ) as run:
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
        _finish_run(run, report, config, started, smooth_at=now)
    return report


def _finish_run(
    run: SweepRun, report: MaterializeReport, config: NudgeConfig, started, *, smooth_at: datetime
) -> None:
    """Smooth (one participant at a time), then write the run's record."""
    with shared_cycle.smoothing_turn():
        report.moved_earlier = smooth_bursts(smooth_at, config)
    if report.provider_calls:
        # The providers' app-wide rates as every process now sees them (a 429
        # anywhere lowers them); the channels' are deliver's to report.
        report.rates = {
            state.budget: state.rate
            for state in rates_in_force(config)
            if state.app_wide and state.budget not in config.channel_rates
        }
    report.seconds = time.monotonic() - started
    run.counts = report.as_dict()
    run.summary = report.summary()[:255]
    if not report.ok:
        run.status = SweepRun.Status.FAILED
        run.error = "; ".join(report.errors[:20])


def _absorb_sync(report: MaterializeReport, summary: SyncSummary) -> None:
    report.calendars_synced += summary.synced
    report.calendars_unchanged += summary.unchanged
    report.calendars_failed += summary.failed
    report.calendars_needing_reauth += summary.needs_reauth
    report.calendars_deferred += summary.deferred
    report.provider_calls += summary.provider_calls
    for result in summary.results:
        add_outcomes(report.calendar_outcomes, {result.provider: {result.outcome: 1}})
