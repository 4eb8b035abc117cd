"""A follow-up's repeat rule: a small RRULE subset, kept on a local wall clock.

Every occurrence is at the first time's local time of day in the follow-up's
zone, across daylight-saving changes; a skipped local time comes the gap's
length later, a repeated one at its first instance. Monthly on a day some
months lack skips those months, as RFC 5545's ``BYMONTHDAY`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.zones import zone_of

if TYPE_CHECKING:  # followups.models imports this module for its choices
    from followups.models import FollowUp


class Repeat(models.TextChoices):
    ONCE = "", _("Once")
    DAILY = "daily", _("Every day")
    WEEKDAYS = "weekdays", _("Every weekday (Monday to Friday)")
    WEEKLY = "weekly", _("Every week on the days ticked")
    MONTHLY = "monthly", _("Every month on the same day")


# Python's weekday numbers (Monday 0) and the short names the API uses.
WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# Far enough to reach the next "monthly on the 31st" from any day.
_NEXT_HORIZON = timedelta(days=366)


def _matches(day: date, repeat: str, weekdays: Sequence[int], first_day: date) -> bool:
    if repeat == Repeat.DAILY:
        return True
    if repeat == Repeat.WEEKDAYS:
        return day.weekday() < 5
    if repeat == Repeat.WEEKLY:
        return day.weekday() in (weekdays or (first_day.weekday(),))
    if repeat == Repeat.MONTHLY:
        return day.day == first_day.day
    return False


def occurrences(
    first: datetime,
    repeat: str,
    weekdays: Sequence[int],
    zone_name: str,
    after: datetime,
    until: datetime,
) -> Iterator[datetime]:
    """The occurrences in ``(after, until]``, in UTC and in order; a one-off has one."""
    if not repeat:
        if after < first <= until:
            yield first
        return
    zone = zone_of(zone_name)
    local_first = first.astimezone(zone)
    wall_time = local_first.time().replace(tzinfo=None, fold=0)
    # A day either side: the window's ends are instants, the days are local.
    day = max(local_first.date(), after.astimezone(zone).date() - timedelta(days=1))
    last_day = until.astimezone(zone).date() + timedelta(days=1)
    while day <= last_day:
        if _matches(day, repeat, weekdays, local_first.date()):
            # fold=0 on a skipped time keeps the offset before the change: the gap later.
            instant = datetime.combine(day, wall_time, tzinfo=zone).astimezone(UTC)
            if instant >= first and after < instant <= until:
                yield instant
        day += timedelta(days=1)


def _rule(follow_up: FollowUp) -> tuple[datetime, str, Sequence[int], str]:
    """The follow-up's rule as ``occurrences`` and ``is_occurrence`` read it."""
    return follow_up.due_at, follow_up.repeat, follow_up.repeat_weekdays, follow_up.repeat_zone


def occurrences_of(follow_up: FollowUp, after: datetime, until: datetime) -> Iterator[datetime]:
    """``occurrences`` of the follow-up's rule as it is now."""
    return occurrences(*_rule(follow_up), after, until)


def next_due(follow_up: FollowUp, now: datetime) -> datetime | None:
    """When it is next due: its one time, or a repeating one's first occurrence from
    ``now`` on."""
    if not follow_up.repeat:
        return follow_up.due_at
    after = now - timedelta(microseconds=1)
    return next(occurrences_of(follow_up, after, after + _NEXT_HORIZON), None)


def is_occurrence(
    instant: datetime, first: datetime, repeat: str, weekdays: Sequence[int], zone_name: str
) -> bool:
    """Whether the rule, as it is now, still has an occurrence at ``instant``."""
    window = occurrences(
        first, repeat, weekdays, zone_name, instant - timedelta(microseconds=1), instant
    )
    return any(found == instant for found in window)


def is_due_at(follow_up: FollowUp | None, instant: datetime) -> bool:
    """Whether a follow-up is still due at ``instant``: its due time, or any occurrence
    a repeating one's rule still has."""
    if follow_up is None:
        return False
    if instant == follow_up.due_at:
        return True
    return bool(follow_up.repeat) and is_occurrence(instant, *_rule(follow_up))
