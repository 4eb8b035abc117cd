"""The fake provider servers, for the delivery-side security tests."""

from tests.fakes.fixtures import (  # noqa: F401 — fixtures
    fake_telegram,
    fake_twilio,
    telegram_settings,
    twilio_settings,
)
from tests.portal.conftest import (  # noqa: F401 — fixtures for the portal-side tests
    _plain_http,
    bot,
    person,
    signed_in,
)
from tests.portal.test_whatsapp import wa  # noqa: F401 — fixture
