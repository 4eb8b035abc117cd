"""What a person has coming between two instants: their events and open follow-ups
(a repeating one's occurrences), in order. The chat's /next and /today and the
morning agenda read it; inside the person's tenant scope."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from django.db.models import Q

from calendars.models import CalendarEvent, EventStatus
from followups.models import FollowUp
from followups.repeat import occurrences_of
from scheduled_sends.models import Kind

MAX_ITEMS = 30  # a day's list in one message
# How long ago a still running all-day event may have begun (a trip) for a day's list.
ALL_DAY_REACH = timedelta(days=31)


def end_of_day(day: date, zone: tzinfo) -> datetime:
    """When a local day ends: its next midnight on the zone's wall clock (an agenda's
    subject, and /today's horizon)."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)


def day_ref(day: date) -> int:
    """An agenda row's ``ref_id``: its local day as YYYYMMDD."""
    return day.year * 10000 + day.month * 100 + day.day


def day_of(ref_id: int) -> date:
    """The local day an agenda row is for."""
    return date(ref_id // 10000, ref_id // 100 % 100, ref_id % 100)


@dataclass(frozen=True)
class Item:
    kind: str  # Kind.EVENT or Kind.FOLLOW_UP
    ref_id: int
    starts_at: datetime
    title: str
    join_url: str = ""
    all_day: bool = False


def items_between(
    user_id: int, after: datetime, until: datetime, *, running_all_day: bool = False
) -> list[Item]:
    """Events (not cancelled, declined or on a calendar whose nudges are off) and
    follow-ups starting in ``(after, until]``, at most ``MAX_ITEMS``, earliest first.
    With ``running_all_day`` (a day's list) an all-day event is there when it overlaps
    ``(after, until)``: today's, begun at midnight, is; tomorrow's, which begins at
    ``until``, is not."""
    window = Q(starts_at__gt=after, starts_at__lte=until)
    if running_all_day:
        running = Q(starts_at__lt=until, starts_at__gt=after - ALL_DAY_REACH) & (
            Q(ends_at__gt=after) | Q(ends_at=None, starts_at__gt=after - timedelta(days=1))
        )
        window = Q(window, all_day=False) | Q(running, all_day=True)
    events = (
        CalendarEvent.objects.filter(
            window, user_id=user_id, declined=False, connection__nudges_on=True
        )
        .exclude(status=EventStatus.CANCELLED)
        .order_by("starts_at", "pk")
        .only("pk", "starts_at", "title", "join_url", "all_day")[:MAX_ITEMS]
    )
    items = [Item(Kind.EVENT, e.pk, e.starts_at, e.title, e.join_url, e.all_day) for e in events]
    follow_ups = FollowUp.objects.filter(user_id=user_id, done=False).filter(
        Q(due_at__gt=after, due_at__lte=until) | ~Q(repeat="") & Q(due_at__lte=until)
    )
    for follow_up in follow_ups.order_by("due_at", "pk")[: MAX_ITEMS * 2]:
        for due_at in occurrences_of(follow_up, after, until):
            items.append(Item(Kind.FOLLOW_UP, follow_up.pk, due_at, follow_up.title))
    items.sort(key=lambda item: (item.starts_at, item.kind, item.ref_id))
    return items[:MAX_ITEMS]
