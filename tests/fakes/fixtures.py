"""Pytest fixtures for the fake providers. Use them from any conftest with

    from tests.fakes.fixtures import fake_telegram, telegram_settings  # noqa: F401

Each fake is a fresh server per test (starting one takes about a millisecond).
The ``*_settings`` fixtures point the channels at the fake, with a short timeout.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.telegram_server import BOT_TOKEN, FakeTelegram
from tests.fakes.twilio_server import ACCOUNT_SID, AUTH_TOKEN, FakeTwilio

WHATSAPP_FROM = "+14155238886"
TEST_TIMEOUT_SECONDS = 1.0


@pytest.fixture
def fake_twilio() -> Iterator[FakeTwilio]:
    with FakeTwilio() as server:
        yield server


@pytest.fixture
def fake_telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


@pytest.fixture
def twilio_settings(settings, fake_twilio: FakeTwilio):
    settings.TWILIO_ACCOUNT_SID = ACCOUNT_SID
    settings.TWILIO_AUTH_TOKEN = AUTH_TOKEN
    settings.TWILIO_WHATSAPP_FROM = WHATSAPP_FROM
    settings.TWILIO_API_BASE_URL = fake_twilio.url
    settings.TWILIO_CONTENT_SID = ""
    settings.TWILIO_STATUS_CALLBACK_URL = ""
    settings.CHANNEL_TIMEOUT_SECONDS = TEST_TIMEOUT_SECONDS
    return settings


@pytest.fixture
def telegram_settings(settings, fake_telegram: FakeTelegram):
    settings.TELEGRAM_BOT_TOKEN = BOT_TOKEN
    settings.TELEGRAM_API_BASE_URL = fake_telegram.base_url
    settings.CHANNEL_TIMEOUT_SECONDS = TEST_TIMEOUT_SECONDS
    return settings
