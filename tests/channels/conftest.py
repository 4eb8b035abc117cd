"""Fixtures for the channel tests: the fake provider servers and a message."""

from __future__ import annotations

import pytest

from messaging.channels.base import NudgeMessage
from tests.fakes.fixtures import (  # noqa: F401 — fixtures
    fake_telegram,
    fake_twilio,
    telegram_settings,
    twilio_settings,
)


def nudge(title: str = "Design review", **overrides) -> NudgeMessage:
    fields = {
        "text": f"{title} starts at 15:00 (in 10 min)",
        "title": title,
        "local_time": "15:00",
        "minutes_until": 10,
        "valid_for_seconds": 25 * 60,
    } | overrides
    return NudgeMessage(**fields)


@pytest.fixture
def message() -> NudgeMessage:
    return nudge()
