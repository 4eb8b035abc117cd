"""Fixtures for the end-user area: signed-in clients, fake providers, linked users."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.actions import ensure_settings
from accounts.models import DeliverySettings
from scheduled_sends.models import ScheduledSend
from tenancy.scope import tenant_scope
from tests.admin.conftest import _plain_http  # noqa: F401 — autouse: plain http for the client
from tests.admin.test_browser import (  # noqa: F401 — fixtures
    _rebuild_middleware_after,
    http_live_server,
)
from tests.fakes.fixtures import (  # noqa: F401 — fixtures
    fake_telegram,
    fake_twilio,
    telegram_settings,
    twilio_settings,
)

User = get_user_model()
PASSWORD = "correct horse battery staple 42"
BOT_USERNAME = "nudge_test_bot"
WEBHOOK_SECRET = "s3cret_Webhook-token_0123456789"


@pytest.fixture
def bot(telegram_settings):  # noqa: F811 — the fixture imported above
    telegram_settings.TELEGRAM_BOT_USERNAME = BOT_USERNAME
    telegram_settings.TELEGRAM_WEBHOOK_SECRET = WEBHOOK_SECRET
    return telegram_settings


@pytest.fixture
def person(db) -> Callable[..., User]:
    """A user who can sign in, with no delivery settings yet (a new user)."""

    def make(username: str) -> User:
        return User.objects.create_user(username, f"{username}@example.com", PASSWORD)

    return make


@pytest.fixture
def signed_in(person) -> Callable[..., tuple[User, Client]]:
    """A signed-in user; on the development console channel unless ``channel`` says
    otherwise ("" is a brand-new user with nothing linked)."""

    def make(username: str, channel: str = "console") -> tuple[User, Client]:
        user = person(username)
        if channel:
            with tenant_scope(user.pk):
                ensure_settings(user.pk)
                DeliverySettings.objects.filter(user_id=user.pk).update(channel=channel)
        client = Client()
        client.force_login(user)
        return user, client

    return make


def queued(user) -> list[ScheduledSend]:
    with tenant_scope(user.pk):
        return list(ScheduledSend.objects.filter(user_id=user.pk).order_by("fire_at"))


def pending(user) -> list[ScheduledSend]:
    return [row for row in queued(user) if row.outcome is None]


def local_input(moment: datetime, zone) -> str:
    """What a person types into a datetime-local field for ``moment`` in ``zone``."""
    return moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M")
