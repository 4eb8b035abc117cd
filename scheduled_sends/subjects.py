"""What a nudge is about, and whether it still deserves one: the skip rules, stated once
for materialize, delivery and Snooze. Just before sending, delivery reads each claimed row's
:class:`Facts` (owner settings and subject as they are now) in the owner's tenant scope."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import make_dataclass
from datetime import datetime, timedelta

from django.db.models import F, Q, Value
from django.utils.translation import gettext, gettext_noop

from accounts.rules import NOT_SET_UP
from calendars.models import CalendarEvent, ConnectionStatus, EventStatus
from core.deployment import NOT_IN_PRODUCTION
from followups.models import FollowUp
from followups.repeat import is_occurrence
from scheduled_sends.day import Item, items_between
from scheduled_sends.models import Kind, NudgeAct, ScheduledSend
from scheduled_sends.queue import statements
from scheduled_sends.queue.transitions import ClaimedSend
from tenancy.scope import tenant_reads, tenant_scope

# One row of ``RESOLVE_NUDGE``: the owner's settings and the subject as they are now,
# each field named once, by its column (``accounts.rules`` reads the settings by name).
Facts = make_dataclass("Facts", statements.RESOLVE_COLUMNS, frozen=True)


def read_facts(rows: Sequence[ClaimedSend]) -> dict[int, Facts]:
    """Each row's facts, read in its owner's scope; one read-only transaction for all."""
    facts: dict[int, Facts] = {}
    if not rows:
        return facts
    constants = {
        "event": Kind.EVENT.value,
        "follow_up": Kind.FOLLOW_UP.value,
        "cancelled": EventStatus.CANCELLED.value,
        "needs_reauth": ConnectionStatus.NEEDS_REAUTH.value,
        "snooze": NudgeAct.Act.SNOOZE.value,
    }
    with tenant_reads() as read:
        for row in rows:
            params = {
                "user_id": row.user_id,
                "kind": row.kind,
                "ref_id": row.ref_id,
                "intended_at": row.intended_at,
            }
            found = read(row.user_id, statements.RESOLVE_NUDGE, {**params, **constants})
            facts[row.id] = Facts(**dict(zip(statements.RESOLVE_COLUMNS, found, strict=True)))
    return facts


# What an event lacks of the :class:`Facts` fields that decide whether it deserves a
# nudge, read from it and its calendar.
EVENT_NOW = {
    "cancelled": Q(status=EventStatus.CANCELLED),
    "needs_reauth": Q(connection__status=ConnectionStatus.NEEDS_REAUTH),
    "calendar_off": Q(connection__nudges_on=False),
    "skip_all_day": F("connection__skip_all_day"),
}


# A recorded skip reason's start (some carry a detail after a colon) -> what the person
# reads: the History page, and a Snooze or Done that cannot act.
SKIP_SENTENCES = {
    NOT_SET_UP: gettext_noop("No way to reach you was set up yet."),
    NOT_IN_PRODUCTION: gettext_noop("Nudges were not going to your phone yet."),
    "nudges paused": gettext_noop("Your nudges were paused."),
    "telegram unreachable": gettext_noop("Telegram could not reach you."),
    "whatsapp unreachable": gettext_noop("WhatsApp could not reach you."),
    "quiet hours": gettext_noop("It fell in your quiet hours."),
    "event no longer in the calendar": gettext_noop("The event was removed from your calendar."),
    "nudges are off for this calendar": gettext_noop("Nudges are off for this calendar."),
    "event cancelled": gettext_noop("The event was cancelled."),
    "event declined": gettext_noop("You declined the event."),
    "all-day event": gettext_noop("All-day events are not nudged."),
    "calendar needs re-authorisation": gettext_noop("Your calendar needs to be connected again."),
    "follow-up deleted": gettext_noop("The follow-up was deleted."),
    "follow-up already done": gettext_noop("The follow-up was already done."),
    "subject moved": gettext_noop("It moved; its new time has its own nudge."),
    "subject already begun": gettext_noop("It had already begun."),
    "account deactivated": gettext_noop("Your account was turned off."),
    "nudges are turned off": gettext_noop("Nudges were turned off for your account."),
    # Support's own words stay with support: the user learns only who settled it.
    "skipped by support": gettext_noop("Our support team cancelled this nudge."),
}


def skip_sentence(reason: str) -> str:
    """What the person reads for a recorded skip ``reason``, in the active language; empty
    for one this table does not know."""
    start = next((start for start in SKIP_SENTENCES if reason.startswith(start)), None)
    return gettext(SKIP_SENTENCES[start]) if start else ""


def event_skip_reason(event: Facts | CalendarEvent | None) -> str | None:
    """Why a calendar event (a :class:`Facts` row, or a ``CalendarEvent`` read with
    :data:`EVENT_NOW`; ``None``: gone) deserves no nudge, if it does not."""
    if event is None:
        return "event no longer in the calendar"
    if event.calendar_off:
        return "nudges are off for this calendar"
    if event.cancelled:
        return "event cancelled"
    if event.declined:
        return "event declined"
    if event.all_day and event.skip_all_day:
        return "all-day event"
    if event.needs_reauth:
        return "calendar needs re-authorisation"
    return None


def follow_up_skip_reason(follow_up: FollowUp | Facts | None) -> str | None:
    """Why a follow-up (``None``: deleted) deserves no nudge, if it does not."""
    if follow_up is None:
        return "follow-up deleted"
    if follow_up.done:
        return "follow-up already done"
    return None


def occurrence_start(row: ClaimedSend, facts: Facts) -> datetime | None:
    """The subject's start this row is for: a repeating follow-up's occurrence if the
    rule, as it is now, still has one at the row's instant; else the subject's one start."""
    if row.kind != Kind.FOLLOW_UP or not facts.repeat or facts.starts_at is None:
        return facts.starts_at
    still = is_occurrence(
        row.subject_starts_at,
        facts.starts_at,
        facts.repeat,
        facts.repeat_weekdays,
        facts.repeat_zone,
    )
    return row.subject_starts_at if still else facts.starts_at


def subject_titles(rows: Iterable[ScheduledSend]) -> dict[tuple[str, int], str]:
    """``(kind, ref_id)`` → the subject's title now (a gone subject is absent), in one
    query, in the caller's scope."""
    ids: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        ids[row.kind].add(row.ref_id)
    if not ids:
        return {}
    # Field columns first, the constant last: the order a UNION needs on both sides.
    events, follow_ups = (
        model.objects.filter(pk__in=ids[kind])
        .annotate(subject_kind=Value(kind.value))
        .values_list("pk", "title", "subject_kind")
        .order_by()
        for model, kind in ((CalendarEvent, Kind.EVENT), (FollowUp, Kind.FOLLOW_UP))
    )
    return {(kind, pk): title for pk, title, kind in events.union(follow_ups, all=True)}


def read_agendas(rows: Sequence[ClaimedSend]) -> dict[int, list[Item]]:
    """Each agenda row's items: its day's events and follow-ups from its instant to the
    day's end (``subject_starts_at``) and its all-day events, read in its owner's scope."""
    agendas: dict[int, list[Item]] = {}
    for row in rows:
        if row.kind == Kind.AGENDA:
            with tenant_scope(row.user_id):
                after = row.intended_at - timedelta(seconds=1)
                agendas[row.id] = items_between(
                    row.user_id, after, row.subject_starts_at, running_all_day=True
                )
    return agendas
