"""Bringing a set of people's queue in line with what they should have queued now:
read what planning needs, plan, insert what is missing and withdraw what should
no longer go, inside their scope.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.db.models import BooleanField, ExpressionWrapper, QuerySet
from django.utils import timezone

from accounts.models import DeliverySettings
from calendars.models import CalendarEvent, ConnectionStatus
from core.config import NudgeConfig
from followups.models import FollowUp
from scheduled_sends.models import NudgeAct, ScheduledSend
from scheduled_sends.queue import states, transitions
from scheduled_sends.subjects import EVENT_NOW
from sweeps.planning import (
    UserSubjects,
    cap_per_user,
    minute_of,
    nudges_on,
    plan_for_user,
    ranked,
)
from tenancy.scope import planning_scope, tenant_scope

logger = logging.getLogger("nudge.materialize")


@dataclass
class UserResult:
    queued: int = 0
    removed: int = 0
    overdue: int = 0
    capped: int = 0
    skipped_disabled: bool = False


def subject_reads(user_ids: list[int], now: datetime, config: NudgeConfig) -> dict[str, QuerySet]:
    """The reads planning makes (settings, events, follow_ups, snoozes, pending), one
    statement each however many users, in whichever scope is open (``tenant_scope`` or
    ``planning_scope``). The plan tests EXPLAIN them."""
    start, end = config.subject_window(now)
    # Each half on its own partial index: a one-off due in the window, and a
    # repeating one begun by its end.
    open_follow_ups = FollowUp.objects.filter(user_id__in=user_ids, done=False, due_at__lte=end)
    return {
        # A deactivated user is planned nothing (their pending rows are withdrawn).
        "settings": DeliverySettings.objects.filter(user_id__in=user_ids, user__is_active=True),
        "events": CalendarEvent.objects.filter(
            user_id__in=user_ids, starts_at__gt=start, starts_at__lte=end
        )
        .exclude(connection__status=ConnectionStatus.NEEDS_REAUTH)
        .annotate(**EVENT_NOW),
        "follow_ups": open_follow_ups.filter(repeat="", due_at__gt=start)
        .order_by()
        .union(open_follow_ups.exclude(repeat="").order_by(), all=True),
        "snoozes": NudgeAct.objects.filter(
            user_id__in=user_ids,
            act=NudgeAct.Act.SNOOZE,
            snoozed_until__gt=now - config.grace,
            snoozed_until__lte=now + config.lookahead,
        ).values_list("user_id", "kind", "ref_id", "snoozed_until", "subject_starts_at"),
        # Overdue: evidence that delivery is not happening, read in the owner's
        # scope so a broken bypass cannot hide it (see health.py).
        "pending": ScheduledSend.objects.filter(
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
    }


def read_subjects(
    user_ids: list[int], now: datetime, config: NudgeConfig
) -> dict[int, UserSubjects]:
    """Everything planning ``user_ids`` needs, in at most five statements for them all."""
    reads = subject_reads(user_ids, now, config)
    subjects = {user_id: UserSubjects() for user_id in user_ids}
    for delivery in reads["settings"]:
        subjects[delivery.user_id].delivery = delivery
    planned = [u for u, s in subjects.items() if nudges_on(s.delivery)]
    if planned:
        narrowed = subject_reads(planned, now, config) if len(planned) < len(user_ids) else reads
        for event in narrowed["events"]:
            subjects[event.user_id].events.append(event)
        for follow_up in narrowed["follow_ups"]:
            subjects[follow_up.user_id].follow_ups.append(follow_up)
        for user_id, *snooze in narrowed["snoozes"]:
            subjects[user_id].snoozes.append(tuple(snooze))
    for user_id, *row in reads["pending"]:
        subjects[user_id].pending.append(tuple(row))
    return subjects


def materialize_user(user_id: int, now: datetime, config: NudgeConfig) -> UserResult:
    """Bring one user's pending queue in line with their calendar and follow-ups: insert
    what is missing, delete unclaimed rows that no longer match their subject."""
    # The next run derives all of this again, so the commit need not wait for the disk.
    with tenant_scope(user_id, relaxed_commit=True):
        return queue_users_in_scope([user_id], now, config)[user_id]


@dataclass
class PlannedSet:
    """Each user's result (or exception), and why the set was planned one by one, if it was."""

    results: dict[int, UserResult | Exception]
    planned_alone_because: str = ""


def materialize_users(user_ids: list[int], now: datetime, config: NudgeConfig) -> PlannedSet:
    """``materialize_user`` for a set of users in one ``planning_scope`` transaction; if it
    fails, each in their own scope (one bad row costs one user), counted in the run log."""
    if not user_ids:
        return PlannedSet({})
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


def queue_users_in_scope(
    user_ids: list[int], now: datetime, config: NudgeConfig
) -> dict[int, UserResult]:
    """Plan ``user_ids`` and bring their queue in line, inside the scope already open."""
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
                per_minute[minute_of(fire_at)] += 1
                result.overdue += overdue
            elif claimed_at is None:
                stale_ids.append(row_id)
        # Still in cap_per_user's order (earliest first), which the ranks follow. A nudge
        # first queued now must still precede its subject (a row already queued is left
        # for delivery to settle, skipped with its reason).
        to_insert = [nudge for nudge in wanted.values() if nudge.subject_starts_at > now]
        channel = user.delivery.channel if user.delivery else ""
        to_queue += [(user_id, channel, row) for row in ranked(to_insert, per_minute)]
    for user_id, removed in transitions.withdraw_unclaimed(stale_ids).items():
        results[user_id].removed = removed
    for user_id, queued in transitions.enqueue_many(to_queue).items():
        results[user_id].queued = queued
    return results


def refresh_queue(user_id: int, now: datetime | None = None, **_signal_kwargs: object) -> None:
    """Re-materialize one user after their change (``plan_changed``); a failure is logged,
    not raised: the change is saved and the next sweep catches up."""
    try:
        materialize_user(user_id, now or timezone.now(), NudgeConfig.from_settings())
    except Exception:
        logger.exception(
            "re-materializing a user after a change failed", extra={"user_id": user_id}
        )
