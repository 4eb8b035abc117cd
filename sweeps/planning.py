"""Planning, pure (no I/O): which nudges a person should have queued now, at their intended
instants, held by quiet hours, capped per user and ranked for the claim's fairness."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from accounts.models import DeliverySettings
from accounts.rules import hold_for_quiet_hours, pause_reason
from calendars.models import CalendarEvent
from core.config import NudgeConfig
from core.zones import zone_of
from followups.models import FollowUp
from followups.repeat import is_due_at, occurrences_of
from providers.normalize import sorted_leads
from scheduled_sends.day import day_ref, end_of_day
from scheduled_sends.models import Kind
from scheduled_sends.queue.transitions import MAX_RANK, NewNudge
from scheduled_sends.subjects import event_skip_reason, follow_up_skip_reason


@dataclass
class _Plan:
    """One person's nudges as they are planned; one row per (subject, instant), the first
    planned keeping it."""

    delivery: DeliverySettings
    now: datetime
    config: NudgeConfig
    nudges: dict[tuple[str, int, datetime], NewNudge] = field(default_factory=dict)

    def add(self, kind: str, ref_id: int, intended_at: datetime, starts_at: datetime) -> None:
        """Plan a nudge moved to the end of quiet hours (one they would skip keeps its time,
        and delivery settles it ``skipped`` with the reason, accounts.rules) if it is inside
        the look-ahead, or past but still inside the grace window."""
        held = hold_for_quiet_hours(intended_at, starts_at, settings=self.delivery)
        if isinstance(held, datetime):
            intended_at = held
        if self.now - self.config.grace < intended_at <= self.now + self.config.lookahead:
            nudge = NewNudge(kind, ref_id, intended_at, starts_at)
            self.nudges.setdefault(nudge.key, nudge)

    def leads(self, reminder_minutes: Iterable[int]) -> list[timedelta]:
        """The subject's own distinct leads (none beyond ``max_lead``; 0 is "at the time"),
        else the person's default: rows written by any path keep the forms' rule."""
        max_minutes = int(self.config.max_lead.total_seconds() // 60)
        minutes = {min(m, max_minutes) for m in reminder_minutes if m >= 0}
        default = timedelta(minutes=self.delivery.default_lead_minutes)
        return [timedelta(minutes=m) for m in sorted_leads(minutes)] or [default]


def _plan_events(plan: _Plan, events: Iterable[CalendarEvent]) -> None:
    """One nudge per distinct reminder lead of each event, else the person's default."""
    for event in events:
        if event_skip_reason(event) is None:
            for lead in plan.leads(event.reminder_minutes):
                plan.add(Kind.EVENT, event.pk, event.starts_at - lead, event.starts_at)


def _plan_follow_ups(plan: _Plan, follow_ups: Iterable[FollowUp]) -> None:
    """One nudge per (occurrence in the subject window, lead) of each follow-up."""
    start, end = plan.config.subject_window(plan.now)
    for follow_up in follow_ups:
        if follow_up_skip_reason(follow_up):
            continue
        leads = plan.leads(follow_up.reminder_minutes)
        for due_at in occurrences_of(follow_up, start, end):
            for lead in leads:
                plan.add(Kind.FOLLOW_UP, follow_up.pk, due_at - lead, due_at)


def cap_per_user(planned: list[NewNudge], config: NudgeConfig) -> tuple[list[NewNudge], int]:
    """The user's earliest nudges within the per-minute and per-look-ahead caps, and
    how many fell out (counted, never silently: one feed must not flood the queue).
    The agenda, at most one a day, is outside these caps."""
    kept, per_minute = [n for n in planned if n.kind == Kind.AGENDA], Counter()
    others = [n for n in planned if n.kind != Kind.AGENDA]
    for nudge in sorted(others, key=lambda n: (n.intended_at, n.kind, n.ref_id)):
        minute = minute_of(nudge.intended_at)
        if len(kept) >= config.max_nudges_per_user:
            break
        if per_minute[minute] >= config.max_nudges_per_user_minute:
            continue
        per_minute[minute] += 1
        kept.append(nudge)
    return kept, len(planned) - len(kept)


@dataclass
class UserSubjects:
    """What planning reads about one user."""

    delivery: DeliverySettings | None = None
    events: list[CalendarEvent] = field(default_factory=list)
    follow_ups: list[FollowUp] = field(default_factory=list)
    snoozes: list[tuple] = field(default_factory=list)
    pending: list[tuple] = field(default_factory=list)


def nudges_on(delivery: DeliverySettings | None) -> bool:
    return delivery is not None and delivery.enabled and pause_reason(delivery) is None


def plan_for_user(
    subjects: UserSubjects, now: datetime, config: NudgeConfig
) -> list[NewNudge] | None:
    """The nudges the user should have queued now; None when nudges are off. No I/O."""
    if not nudges_on(subjects.delivery):
        return None
    plan = _Plan(subjects.delivery, now, config)
    _plan_events(plan, subjects.events)
    _plan_follow_ups(plan, subjects.follow_ups)
    _plan_agenda(plan)
    _plan_snoozed(plan, subjects.snoozes, subjects.events, subjects.follow_ups)
    return list(plan.nudges.values())


def _plan_agenda(plan: _Plan) -> None:
    """The morning agenda: one a local day at the person's chosen time (moved by
    quiet hours like any nudge); its subject is the day, which ends at local midnight."""
    agenda_at = plan.delivery.agenda_at
    if agenda_at is None:
        return
    zone = zone_of(plan.delivery.timezone)
    today = plan.now.astimezone(zone).date()
    for day in (today - timedelta(days=1), today, today + timedelta(days=1)):
        wall = datetime.combine(day, agenda_at.replace(second=0, microsecond=0))
        intended = wall.replace(tzinfo=zone).astimezone(UTC)
        plan.add(Kind.AGENDA, day_ref(day), intended, end_of_day(day, zone).astimezone(UTC))


def _plan_snoozed(
    plan: _Plan,
    snoozes: Iterable[tuple],
    events: Iterable[CalendarEvent],
    follow_ups: Iterable[FollowUp],
) -> None:
    """The nudges Snooze taps asked for, still ahead (``snoozes``: kind, ref_id,
    snoozed_until, subject_starts_at); one lapses when its subject moved, went or was done."""
    starts = {(Kind.EVENT, e.pk): e.starts_at for e in events if event_skip_reason(e) is None}
    open_follow_ups = {follow_up.pk: follow_up for follow_up in follow_ups}
    for kind, ref_id, until, starts_at in snoozes:
        if kind == Kind.FOLLOW_UP:
            if not is_due_at(open_follow_ups.get(ref_id), starts_at):
                continue
        elif starts.get((kind, ref_id)) != starts_at:
            continue
        plan.add(kind, ref_id, until, starts_at)


def minute_of(instant: datetime) -> datetime:
    return instant.replace(second=0, microsecond=0)


def ranked(nudges: list[NewNudge], per_minute: Counter[datetime]) -> list[NewNudge]:
    """Each nudge ranked after the user's rows already in its minute (the claim's fairness)."""
    ranked = []
    for nudge in nudges:
        minute = minute_of(nudge.intended_at)
        ranked.append(replace(nudge, user_rank=min(per_minute[minute], MAX_RANK)))
        per_minute[minute] += 1
    return ranked
