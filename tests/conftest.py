"""Shared fixtures. The suite always connects as the application's own
non-superuser role (see tests/test_isolation.py::test_harness_is_not_vacuous)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from scheduled_sends.channels.recording import RecordingChannel
from scheduled_sends.models import DeliverySettings
from tenancy.scope import tenant_scope

User = get_user_model()

RECORDING_BACKENDS = {
    "console": "scheduled_sends.channels.recording.RecordingChannel",
    "telegram": "scheduled_sends.channels.recording.RecordingChannel",
    "whatsapp": "scheduled_sends.channels.recording.RecordingChannel",
}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    """Create a user with delivery settings (written inside the user's own scope)."""
    counter = iter(range(1, 1_000_000))

    def make(
        username: str | None = None,
        *,
        channel: str = "console",
        timezone: str = "UTC",
        default_lead_minutes: int = 10,
        enabled: bool = True,
        **settings_fields,
    ) -> User:
        user = User.objects.create_user(username=username or f"user{next(counter)}")
        with tenant_scope(user.pk):
            DeliverySettings.objects.create(
                user=user,
                channel=channel,
                timezone=timezone,
                default_lead_minutes=default_lead_minutes,
                enabled=enabled,
                **settings_fields,
            )
        return user

    return make


@pytest.fixture
def recording_channel(settings):
    """Route every channel to the in-memory recording channel."""
    settings.NUDGE_CHANNEL_BACKENDS = RECORDING_BACKENDS
    RecordingChannel.reset()
    yield RecordingChannel
    RecordingChannel.reset()
