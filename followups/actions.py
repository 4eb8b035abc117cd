"""The one way a follow-up is created or changed, whatever the door (website, API, chat).

Each function opens the user's scope itself and, once committed, announces the
change so the user is re-planned at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from typing import Any

from django.utils.translation import gettext as _

from accounts.actions import announce_change, ensure_settings
from core.config import NudgeConfig
from core.ids import owned
from core.zones import known_zone
from followups.models import FollowUp
from followups.repeat import WEEKDAY_NAMES, Repeat, next_due
from providers.normalize import MAX_LEADS_PER_EVENT
from tenancy.scope import tenant_scope

TITLE_MAX_CHARS = 200


class FollowUpInvalid(ValueError):
    """A field's value is refused: ``field`` names it and ``rule`` the check that refused it;
    the message says why for the API, ``in_words`` for a person."""

    def __init__(self, field: str, message: str, rule: str = "") -> None:
        super().__init__(message)
        self.field, self.rule = field, rule

    def in_words(self) -> str:
        """What the website and the chat say, in the active language: the message names the
        API's fields, so a person never sees it."""
        if self.rule == "past":
            return past_time()
        if self.rule == "too_far":
            return _(
                "That is more than %(years)s years ahead. Check the year, or pick a date "
                "within the next %(years)s years."
            ) % {"years": MAX_DUE_YEARS}
        if self.rule == "control_characters":
            return _("Remove the line breaks or special characters from the text.")
        if self.rule == "too_many_reminders":
            return _("Pick at most %(count)s reminders.") % {"count": MAX_LEADS_PER_EVENT}
        if self.field == "reminder_minutes":
            return _("Pick reminders from the list.")
        if self.field == "repeat_weekdays":
            return _("Pick at least one day of the week.")
        if self.rule == "cap":
            return _("You have as many follow-ups as allowed. Delete some to add more.")
        return _("That could not be saved. Check the fields and try again.")


def past_time() -> str:
    return _("That time has already passed. Pick a time later than now.")


def clean_title(title: object) -> str:
    if not isinstance(title, str):
        raise FollowUpInvalid("title", "title must be a string")
    title = title.strip()
    if not title:
        raise FollowUpInvalid("title", "title must not be empty")
    if len(title) > TITLE_MAX_CHARS:
        raise FollowUpInvalid(
            "title", f"title is {len(title)} characters; the limit is {TITLE_MAX_CHARS}"
        )
    if any(ord(c) < 32 and c not in "\t" for c in title) or "\x00" in title:
        raise FollowUpInvalid(
            "title", "title must not contain control characters", "control_characters"
        )
    return title


# Further ahead is a typo (2999 for 2029) more often than a plan.
MAX_DUE_YEARS = 5
MAX_DUE_AHEAD = timedelta(days=MAX_DUE_YEARS * 365 + 2)


def clean_due(due_at: datetime, now: datetime) -> datetime:
    if due_at.tzinfo is None or due_at.utcoffset() is None:
        raise FollowUpInvalid(
            "due_at", "due_at needs a UTC offset (e.g. 2026-12-24T18:00:00+01:00)"
        )
    if due_at <= now:
        raise FollowUpInvalid("due_at", "due_at is in the past", "past")
    if due_at > now + MAX_DUE_AHEAD:
        raise FollowUpInvalid(
            "due_at", f"due_at is too far ahead: at most {MAX_DUE_YEARS} years from now", "too_far"
        )
    return due_at


def clean_repeat(repeat: object, weekdays: object) -> tuple[str, list[int]]:
    """The rule and its days (Python's numbers, Monday 0); days only for ``weekly``."""
    if repeat == "once":
        repeat = ""
    if not isinstance(repeat, str) or repeat not in Repeat.values:
        allowed = ", ".join(v or "once" for v in Repeat.values)
        raise FollowUpInvalid("repeat", f"repeat must be one of: {allowed}")
    if not isinstance(weekdays, list | tuple) or not all(
        isinstance(day, int) and not isinstance(day, bool) and 0 <= day <= 6 for day in weekdays
    ):
        raise FollowUpInvalid("repeat_weekdays", "repeat_weekdays are days of the week")
    if repeat == Repeat.WEEKLY and not weekdays:
        raise FollowUpInvalid("repeat_weekdays", "pick at least one day of the week")
    return repeat, sorted(set(weekdays)) if repeat == Repeat.WEEKLY else []


def clean_reminders(minutes: object, config: NudgeConfig) -> list[int]:
    """Distinct leads in minutes (0 is "at the time"), at most as many as an event may have."""
    max_minutes = int(config.max_lead.total_seconds() // 60)
    if not isinstance(minutes, list | tuple) or not all(
        isinstance(m, int) and not isinstance(m, bool) for m in minutes
    ):
        raise FollowUpInvalid("reminder_minutes", "reminder_minutes must be whole minutes")
    if any(not 0 <= m <= max_minutes for m in minutes):
        raise FollowUpInvalid(
            "reminder_minutes", f"a reminder is between 0 and {max_minutes} minutes before"
        )
    distinct = sorted(set(minutes))
    if len(distinct) > MAX_LEADS_PER_EVENT:
        raise FollowUpInvalid(
            "reminder_minutes",
            f"at most {MAX_LEADS_PER_EVENT} reminders per follow-up",
            "too_many_reminders",
        )
    return distinct


def clean_zone(name: object) -> str:
    zone = known_zone(name)  # never raises, whatever a request sent
    if zone is None:
        raise FollowUpInvalid("time_zone", "time_zone must be an IANA zone (e.g. Europe/Berlin)")
    return zone.key


def quick_due(choice: str, now: datetime, zone: tzinfo) -> datetime:
    """The due time one of the follow-up form's quick choices means, from ``now`` in
    ``zone`` (the mornings are wall-clock 9:00 there)."""
    if choice == "in_1h":
        return now + timedelta(hours=1)
    if choice == "in_3h":
        return now + timedelta(hours=3)
    today = now.astimezone(zone).date()
    if choice == "tomorrow_morning":
        day = today + timedelta(days=1)
    elif choice == "monday_morning":
        day = today + timedelta(days=7 - today.weekday())  # Monday next (never today)
    else:
        raise FollowUpInvalid("due_at", "unknown quick choice")
    return datetime.combine(day, time(9, 0), tzinfo=zone)


@dataclass(frozen=True)
class Schedule:
    """How a follow-up comes back and when it is nudged; None keeps the current value
    (for a new one: once, in the owner's zone, at their default lead)."""

    repeat: str | None = None
    repeat_weekdays: Sequence[int] | None = None
    time_zone: str | None = None
    reminder_minutes: Sequence[int] | None = None


@dataclass(frozen=True)
class FollowUpChange:
    title: str | None = None
    due_at: datetime | None = None
    done: bool | None = None
    schedule: Schedule | None = None


def _set_schedule(follow_up: FollowUp, schedule: Schedule, config: NudgeConfig) -> None:
    """Clean ``schedule`` onto the follow-up's fields; what it leaves None is kept."""

    def given(value, kept):
        return kept if value is None else value

    follow_up.repeat, follow_up.repeat_weekdays = clean_repeat(
        given(schedule.repeat, follow_up.repeat),
        list(given(schedule.repeat_weekdays, follow_up.repeat_weekdays)),
    )
    follow_up.repeat_zone = clean_zone(given(schedule.time_zone, follow_up.repeat_zone))
    reminders = given(schedule.reminder_minutes, follow_up.reminder_minutes)
    follow_up.reminder_minutes = clean_reminders(list(reminders), config)


def list_follow_ups(user_id: int, *, done: bool | None = None, limit: int = 500) -> list[FollowUp]:
    with tenant_scope(user_id):
        rows = FollowUp.objects.filter(user_id=user_id)
        if done is not None:
            rows = rows.filter(done=done)
        return list(rows.order_by("done", "due_at", "pk")[:limit])


def get_follow_up(user_id: int, follow_up_id: int) -> FollowUp | None:
    with tenant_scope(user_id):
        return owned(FollowUp.objects, user_id, follow_up_id).first()


def _check_cap(user_id: int, cap: int) -> None:
    """At most ``cap`` follow-ups, done or not; inside the scope."""
    if FollowUp.objects.filter(user_id=user_id).count() >= cap:
        raise FollowUpInvalid(
            "", f"you have {cap} follow-ups, the most allowed; delete some to add more", "cap"
        )


def create_follow_up(
    user_id: int,
    title: str,
    due_at: datetime,
    now: datetime,
    config: NudgeConfig,
    schedule: Schedule = Schedule(),
) -> FollowUp:
    """A new follow-up, due first at ``due_at`` (weekly on Mon and Thu, typed for a
    Saturday, is first due the Monday)."""
    title, due_at = clean_title(title), clean_due(due_at, now)
    with tenant_scope(user_id):
        follow_up = FollowUp(user_id=user_id, title=title, due_at=due_at)
        if schedule.time_zone is None:  # the owner's zone
            follow_up.repeat_zone = ensure_settings(user_id).timezone or "UTC"
        _set_schedule(follow_up, schedule, config)
        _check_cap(user_id, config.max_follow_ups_per_user)
        follow_up.due_at = next_due(follow_up, due_at) or due_at
        follow_up.save()
    announce_change(user_id, now)
    return follow_up


def change_follow_up(
    user_id: int,
    follow_up_id: int,
    change: FollowUpChange,
    now: datetime,
    config: NudgeConfig | None = None,
) -> FollowUp | None:
    """Apply ``change``; None when the user has no such follow-up. An unchanged due
    time is not checked again (a repeating one's is long past)."""
    title = clean_title(change.title) if change.title is not None else None
    with tenant_scope(user_id):
        follow_up = owned(FollowUp.objects, user_id, follow_up_id).first()
        if follow_up is None:
            return None
        if change.schedule is not None:
            if config is None:
                raise TypeError("changing a follow-up's schedule needs the config (its lead cap)")
            _set_schedule(follow_up, change.schedule, config)
        if title is not None:
            follow_up.title = title
        if change.due_at is not None and change.due_at != follow_up.due_at:
            follow_up.due_at = clean_due(change.due_at, now)
        if change.due_at is not None or change.schedule is not None:
            follow_up.due_at = next_due(follow_up, follow_up.due_at) or follow_up.due_at
        if change.done is not None:
            follow_up.done = change.done
        follow_up.save()
    announce_change(user_id, now)
    return follow_up


def delete_follow_up(user_id: int, follow_up_id: int, now: datetime) -> bool:
    with tenant_scope(user_id):
        deleted, _ = owned(FollowUp.objects, user_id, follow_up_id).delete()
    if deleted:
        announce_change(user_id, now)
    return bool(deleted)


def api_instant(moment: datetime | None) -> str | None:
    """In UTC, so an instant reads the same whether it was just sent or read back."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def as_json(follow_up: FollowUp, now: datetime) -> dict[str, Any]:
    return {
        "id": follow_up.pk,
        "title": follow_up.title,
        "due_at": api_instant(follow_up.due_at),
        "done": follow_up.done,
        "created_at": api_instant(follow_up.created_at),
        "repeat": follow_up.repeat or "once",
        "repeat_weekdays": [WEEKDAY_NAMES[day] for day in follow_up.repeat_weekdays],
        "time_zone": follow_up.repeat_zone,
        "reminder_minutes": list(follow_up.reminder_minutes),
        "next_due_at": api_instant(next_due(follow_up, now)),
    }
