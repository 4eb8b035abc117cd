"""Fixtures for the support console: staff users, queue rows, calendar rows.

Tenant rows are written inside the owner's ``tenant_scope`` (RLS is forced and
the test role is no superuser) and read back the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.utils import timezone

from calendars.models import CalendarConnection, CalendarEvent
from followups.models import FollowUp
from scheduled_sends.models import ScheduledSend
from tenancy.scope import current_scope, tenant_scope

User = get_user_model()

ACCESS_TOKEN = "gAAAAA-ACCESS-TOKEN-never-shown-7f3a"
REFRESH_TOKEN = "gAAAAA-REFRESH-TOKEN-never-shown-91bc"
FEED_URL = "gAAAAA-FEED-URL-never-shown-c0de"
SECRETS = (ACCESS_TOKEN, REFRESH_TOKEN, FEED_URL)
PASSWORD = "correct horse battery staple 42"


def lease() -> timedelta:
    return timedelta(seconds=settings.NUDGE_LEASE_SECONDS)


@pytest.fixture(autouse=True)
def _plain_http(settings):
    """The test client speaks plain http; production hardening would redirect it."""
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False


@pytest.fixture
def support_user(db) -> User:
    """A staff user with every permission (Django's superuser flag, not the DB's)."""
    return User.objects.create_user(
        "support", "support@example.com", PASSWORD, is_staff=True, is_superuser=True
    )


@pytest.fixture
def viewer_user(db) -> User:
    """Staff who may look at the queue but not change it."""
    user = User.objects.create_user("viewer", "viewer@example.com", PASSWORD, is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_scheduledsend"),
        Permission.objects.get(codename="view_calendarconnection"),
    )
    return user


@pytest.fixture
def staff_client(client, support_user):
    client.force_login(support_user)
    return client


@pytest.fixture
def make_send(db) -> Callable[..., ScheduledSend]:
    """Queue one row for ``user`` (inside the user's scope); fields override defaults."""
    refs = iter(range(10_000, 1_000_000))

    def make(user, **fields) -> ScheduledSend:
        fire_at = fields.pop("fire_at", timezone.now() + timedelta(minutes=5))
        values = {
            "kind": "follow_up",
            "ref_id": next(refs),
            "intended_at": fire_at,
            "subject_starts_at": fire_at + timedelta(minutes=10),
            **fields,
        }
        with tenant_scope(user.pk):
            return ScheduledSend.objects.create(user=user, fire_at=fire_at, **values)

    return make


@pytest.fixture
def make_state_rows(make_send) -> Callable[..., dict[str, ScheduledSend]]:
    """One row in each derived state for ``user``, keyed by state."""

    def make(user) -> dict[str, ScheduledSend]:
        now = timezone.now()
        soon = now + timedelta(minutes=2)
        return {
            "pending": make_send(user, fire_at=soon),
            "claimed": make_send(
                user, fire_at=now, claimed_at=now - timedelta(seconds=5), claim_token=uuid.uuid4()
            ),
            "stuck": make_send(
                user,
                fire_at=now - timedelta(minutes=1),
                claimed_at=now - lease() - timedelta(seconds=60),
                claim_token=uuid.uuid4(),
            ),
            "retrying": make_send(user, fire_at=now, attempts=1, last_error="timeout"),
            "sent": make_send(
                user,
                fire_at=now - timedelta(hours=1),
                sent_at=now,
                outcome="sent",
                provider_message_id="SM-sent-1",
                channel="whatsapp",
            ),
            "skipped": make_send(
                user, fire_at=now - timedelta(hours=2), sent_at=now, outcome="skipped"
            ),
            "failed": make_send(
                user,
                fire_at=now - timedelta(minutes=3),
                outcome="failed",
                attempts=1,
                last_error="400 invalid number",
            ),
            "expired": make_send(user, fire_at=now - timedelta(hours=3), outcome="expired"),
        }

    return make


@pytest.fixture
def make_connection(db) -> Callable[..., CalendarConnection]:
    def make(user, **fields) -> CalendarConnection:
        values = {
            "provider": "google",
            "account": f"{user.username}@example.com",
            "access_token_encrypted": ACCESS_TOKEN,
            "refresh_token_encrypted": REFRESH_TOKEN,
            "feed_url_encrypted": FEED_URL,
            "last_error": "",
            **fields,
        }
        with tenant_scope(user.pk):
            return CalendarConnection.objects.create(user=user, **values)

    return make


@pytest.fixture
def make_event(make_connection) -> Callable[..., CalendarEvent]:
    def make(user, title: str, starts_at: datetime | None = None, **fields) -> CalendarEvent:
        connection_ = fields.pop("connection", None) or make_connection(user)
        with tenant_scope(user.pk):
            return CalendarEvent.objects.create(
                user=user,
                connection=connection_,
                provider_event_id=uuid.uuid4().hex,
                title=title,
                starts_at=starts_at or timezone.now() + timedelta(minutes=15),
                **fields,
            )

    return make


@pytest.fixture
def make_follow_up(db) -> Callable[..., FollowUp]:
    def make(user, title: str, due_at: datetime | None = None) -> FollowUp:
        with tenant_scope(user.pk):
            return FollowUp.objects.create(
                user=user, title=title, due_at=due_at or timezone.now() + timedelta(minutes=15)
            )

    return make


def reload(obj):
    """Read a tenant row back inside its owner's scope."""
    with tenant_scope(obj.user_id):
        return type(obj).objects.get(pk=obj.pk)


def state_now(row) -> str:
    """A queue row's state as the queue defines it, read back in its owner's scope."""
    with tenant_scope(row.user_id):
        return type(row).objects.with_state(timezone.now(), lease()).get(pk=row.pk).queue_state


def db_role() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        return cursor.fetchone()[0]


@contextmanager
def record_scopes() -> Iterator[list[tuple[str | None, str]]]:
    """Record ``(current_scope(), sql)`` for every query the block runs on the connection."""
    seen: list[tuple[str | None, str]] = []

    def wrapper(execute, sql, params, many, context):
        seen.append((current_scope(), sql))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield seen
