"""Small builders for subjects and queue rows, always inside the owner's scope."""

from __future__ import annotations

from datetime import datetime, timedelta

from calendars.models import CalendarConnection, CalendarEvent, Provider
from followups.models import FollowUp
from scheduled_sends.models import ScheduledSend
from tenancy.scope import tenant_scope

# A Telegram rate whose minute holds 5 nudges: x 0.95 (the pacer's mean under its ceiling)
# x 55 s of a deliver run's budget x 0.8 headroom (the defaults).
FIVE_A_MINUTE = 5.5 / (55 * 0.8)


def add_event(
    user,
    starts_at: datetime,
    *,
    title: str = "Design review",
    reminder_minutes: list[int] | None = None,
    **fields,
) -> CalendarEvent:
    with tenant_scope(user.pk):
        connection = CalendarConnection.objects.filter(user=user).first()
        if connection is None:
            connection = CalendarConnection.objects.create(user=user, provider=Provider.ICS)
        count = CalendarEvent.objects.filter(user=user).count()
        return CalendarEvent.objects.create(
            user=user,
            connection=connection,
            provider_event_id=f"evt-{user.pk}-{count}",
            title=title,
            starts_at=starts_at,
            ends_at=starts_at + timedelta(minutes=30),
            reminder_minutes=reminder_minutes or [],
            **fields,
        )


def add_follow_up(user, due_at: datetime, *, title: str = "Call back Priya") -> FollowUp:
    with tenant_scope(user.pk):
        return FollowUp.objects.create(user=user, title=title, due_at=due_at)


def update(user, obj, **fields) -> None:
    with tenant_scope(user.pk):
        type(obj).objects.filter(pk=obj.pk).update(**fields)


def rows(user) -> list[ScheduledSend]:
    with tenant_scope(user.pk):
        return list(ScheduledSend.objects.filter(user=user).order_by("fire_at", "id"))
