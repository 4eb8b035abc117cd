"""The fake provider servers, for the sweeps that run through the real channels."""

from tests.fakes.fixtures import (  # noqa: F401 — fixtures
    fake_telegram,
    fake_twilio,
    telegram_settings,
    twilio_settings,
)
