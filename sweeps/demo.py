"""Demo users with delivery settings, events and follow-ups over the look-ahead,
written through the same tenant-scoped writes as the product."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from accounts.models import Channel, DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent, Provider
from followups.models import FollowUp
from tenancy.scope import tenant_scope

TITLES = [
    "Design review",
    "1:1 with Sam",
    "Standup",
    "Customer call — Acme",
    "Quarterly planning",
    "Dentist",
    "Interview: backend engineer",
    "Lunch with Ana",
]
EVENT_REMINDER = timedelta(minutes=30)
FOLLOW_UPS = ["Send the proposal", "Call back Priya", "Renew the domain", "Reply to legal"]


def _address(channel: str, index: int) -> dict[str, str]:
    if channel == Channel.WHATSAPP:
        return {"whatsapp_number": f"+1415555{index % 10000:04d}"}
    if channel == Channel.TELEGRAM:
        return {"telegram_chat_id": str(100000 + index)}
    return {}


def seed_demo(
    *,
    users: int,
    events_per_user: int,
    follow_ups_per_user: int,
    channel: str,
    start: datetime,
    window: timedelta,
    username_prefix: str = "demo",
    due_now: int = 0,
    password: str | None = None,
    progress=None,
    default_lead: timedelta,
) -> int:
    """Create the missing demo users ``{prefix}1…{prefix}N`` with their data; ``due_now``
    follow-ups each fall due one default lead from ``start`` (nothing before it). New users
    share ``password`` if given, else an unusable one. How many users were new; ``progress``
    is told every 1,000."""
    soon = start + default_lead
    # The other subjects start after the "due now" ones, so their nudges are still ahead.
    first, spread_over = soon, window - default_lead
    User = get_user_model()
    unusable = make_password(password)
    existing = set(
        User.objects.filter(username__startswith=username_prefix).values_list("username", flat=True)
    )
    new_users = [
        User(username=f"{username_prefix}{i}", password=unusable, email="")
        for i in range(1, users + 1)
        if f"{username_prefix}{i}" not in existing
    ]
    User.objects.bulk_create(new_users, batch_size=2000)
    created = User.objects.filter(username__in=[u.username for u in new_users]).order_by("pk")
    for index, user in enumerate(created, start=1):
        with tenant_scope(user.pk):
            DeliverySettings.objects.create(user=user, channel=channel, **_address(channel, index))
            connection = CalendarConnection.objects.create(
                user=user, provider=Provider.LOCAL, account="demo calendar"
            )
            CalendarEvent.objects.bulk_create(
                _events(user.pk, connection, events_per_user, first, spread_over, index, start)
            )
            FollowUp.objects.bulk_create(
                _follow_ups(user.pk, follow_ups_per_user, first, spread_over, index)
                + [
                    FollowUp(user=user, title=f"Demo: check in ({n + 1})", due_at=soon)
                    for n in range(due_now)
                ]
            )
        if progress and index % 1000 == 0:
            progress(index)
    return len(new_users)


def _spread(count: int, first: datetime, window: timedelta, offset: int) -> list[datetime]:
    """``count`` instants after ``first`` across the window, whole minutes, staggered per user."""
    step = window / (count + 1)
    base = first.replace(second=0, microsecond=0)
    if base < first:
        base += timedelta(minutes=1)  # rounded up: never before ``first``
    return [base + step * (i + 1) + timedelta(minutes=(offset * 7 + i) % 5) for i in range(count)]


def _events(user_id, connection, count, first, window, index, start) -> list[CalendarEvent]:
    events = []
    for i, starts_at in enumerate(_spread(count, first, window, index)):
        # Every third event has its own reminder, unless it would fire before ``start``.
        own_reminder = i % 3 == 0 and starts_at - EVENT_REMINDER > start
        events.append(
            CalendarEvent(
                user_id=user_id,
                connection=connection,
                provider_event_id=f"demo-{index}-{i}",
                title=TITLES[(index + i) % len(TITLES)],
                starts_at=starts_at,
                ends_at=starts_at + timedelta(minutes=30),
                reminder_minutes=[EVENT_REMINDER.seconds // 60] if own_reminder else [],
            )
        )
    return events


def _follow_ups(user_id, count, first, window, index) -> list[FollowUp]:
    return [
        FollowUp(user_id=user_id, title=FOLLOW_UPS[(index + i) % len(FOLLOW_UPS)], due_at=due_at)
        for i, due_at in enumerate(_spread(count, first, window, index + 3))
    ]
