"""WhatsAppChannel against the fake Twilio server, through the real twilio library."""

from __future__ import annotations

import json
import logging
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import formatdate

import pytest
from twilio.base.exceptions import TwilioRestException, TwilioServiceException

from messaging.channels.base import (
    PermanentSendError,
    RateLimited,
    TransientSendError,
    UnconfirmedSendError,
)
from messaging.messages import compose_agenda
from messaging.whatsapp.send import (
    MAX_VALIDITY_SECONDS,
    WhatsAppChannel,
    classify_twilio_error,
)
from scheduled_sends.day import Item
from tests.channels.conftest import nudge
from tests.fakes import twilio_server as twilio
from tests.fakes.base import Fault
from tests.fakes.twilio_server import AUTH_TOKEN, FakeTwilio

MARKUP_TITLE = "*_[]()~`>#+-=|{}.!<b>&amp;"


@pytest.fixture
def channel(twilio_settings):
    channel = WhatsAppChannel()
    yield channel
    channel.close()


def test_sends_body_to_whatsapp_addresses_and_returns_the_sid(channel, fake_twilio, message):
    receipt = channel.send("+15550001111", message)

    [delivered] = fake_twilio.delivered
    assert receipt.provider_message_id == delivered.message_id
    assert receipt.provider_message_id.startswith("SM")
    assert delivered.params["To"] == "whatsapp:+15550001111"
    assert delivered.params["From"] == "whatsapp:+14155238886"
    assert delivered.params["Body"] == message.text
    assert "ContentSid" not in delivered.params
    assert "StatusCallback" not in delivered.params


def test_validity_period_is_the_nudges_own_bounded_by_twilio_limits(channel, fake_twilio):
    channel.send("+15550001111", nudge(valid_for_seconds=900))
    channel.send("+15550001111", nudge(valid_for_seconds=10 * 3600))
    channel.send("+15550001111", nudge(valid_for_seconds=0))

    periods = [d.params["ValidityPeriod"] for d in fake_twilio.delivered]
    assert periods == ["900", str(MAX_VALIDITY_SECONDS), "1"]


def test_template_replaces_body_when_a_content_sid_is_set(twilio_settings, fake_twilio):
    twilio_settings.TWILIO_CONTENT_SID = "HX" + "a" * 32
    twilio_settings.TWILIO_STATUS_CALLBACK_URL = "https://nudge.example/twilio/status"
    channel = WhatsAppChannel()
    channel.send("+15550001111", nudge(title="Standup", local_time="09:30", minutes_until=5))

    [delivered] = fake_twilio.delivered
    assert "Body" not in delivered.params
    assert delivered.params["ContentSid"] == "HX" + "a" * 32
    assert json.loads(delivered.params["ContentVariables"]) == {
        "1": "Standup",
        "2": "09:30",
        "3": "5",
    }
    assert delivered.params["StatusCallback"] == "https://nudge.example/twilio/status"


def test_a_french_agendas_template_title_ends_with_its_date(twilio_settings, fake_twilio):
    """'Votre journée, ven. 4 déc. :' loses its colon and the space French puts before it:
    the template reads the day, not a dangling space ('déc.  à 09:00')."""
    twilio_settings.TWILIO_CONTENT_SID = "HX" + "a" * 32
    at = datetime(2026, 12, 4, 7, 30, tzinfo=UTC)
    agenda = compose_agenda(
        [Item("follow_up", 1, at + timedelta(hours=1), "Dentist")],
        day=at.date(),
        now=at,
        tz_name="UTC",
        valid_until=at + timedelta(minutes=5),
        language="fr",
    )
    channel = WhatsAppChannel()
    channel.send("+15550001111", agenda)
    channel.close()

    [delivered] = fake_twilio.delivered
    assert json.loads(delivered.params["ContentVariables"])["1"] == "Votre journée, ven. 4 déc."


def test_markup_in_the_title_arrives_byte_for_byte(channel, fake_twilio):
    message = nudge(title=MARKUP_TITLE)
    channel.send("+15550001111", message)

    [delivered] = fake_twilio.delivered
    assert delivered.params["Body"] == message.text
    assert MARKUP_TITLE in delivered.params["Body"]


def test_basic_auth_reaches_the_server_and_a_wrong_token_is_permanent(
    twilio_settings, fake_twilio, message
):
    twilio_settings.TWILIO_AUTH_TOKEN = "not-the-token"
    with pytest.raises(PermanentSendError) as caught:
        WhatsAppChannel().send("+15550001111", message)
    assert caught.value.code == "20003"
    assert "not-the-token" not in caught.value.describe()
    assert fake_twilio.delivered == []


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (twilio.INVALID_TO, "21211"),
        (twilio.UNSUBSCRIBED, "21610"),
        (twilio.NOT_MOBILE, "21614"),
        (twilio.OUTSIDE_WINDOW, "63016"),
        (twilio.REGION_NOT_ENABLED, "21408"),
    ],
)
def test_permanent_errors(channel, fake_twilio, message, fault, code):
    fake_twilio.plan.for_recipient("whatsapp:+15550002222", fault)
    with pytest.raises(PermanentSendError) as caught:
        channel.send("+15550002222", message)
    assert caught.value.code == code
    assert caught.value.describe().startswith(f"[{code}]")
    # Other recipients are unaffected.
    channel.send("+15550003333", message)
    assert [d.recipient for d in fake_twilio.delivered] == ["whatsapp:+15550003333"]


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (twilio.SERVER_ERROR, "20500"),
        (twilio.SERVICE_UNAVAILABLE, "20503"),
        (twilio.BAD_GATEWAY, "502"),
    ],
)
def test_server_errors_are_transient(channel, fake_twilio, message, fault, code):
    fake_twilio.plan.on_call(1, fault)
    with pytest.raises(TransientSendError) as caught:
        channel.send("+15550001111", message)
    assert not isinstance(caught.value, RateLimited)
    assert caught.value.code == code
    channel.send("+15550001111", message)  # the next call goes through
    assert len(fake_twilio.delivered) == 1


def test_429_honours_retry_after(channel, fake_twilio, message):
    fake_twilio.plan.on_call(1, twilio.TOO_MANY_REQUESTS)
    with pytest.raises(RateLimited) as caught:
        channel.send("+15550001111", message)
    assert caught.value.code == "20429"
    assert caught.value.retry_after == 7


def test_channel_rate_limit_63018_without_retry_after_waits_a_minute(channel, fake_twilio, message):
    fake_twilio.plan.on_call(1, twilio.CHANNEL_RATE_LIMIT)
    with pytest.raises(RateLimited) as caught:
        channel.send("+15550001111", message)
    assert caught.value.code == "63018"
    assert caught.value.retry_after == 60


def test_63018_is_a_rate_limit_whatever_the_http_status():
    exc = TwilioRestException(400, "uri", "Unable to create record: Rate limit", 63018, "POST")
    assert isinstance(classify_twilio_error(exc), RateLimited)


def test_problem_details_errors_are_classified_too():
    limited = TwilioServiceException("about:blank", "Too Many Requests", 429, 20429, None)
    invalid = TwilioServiceException("about:blank", "Invalid To", 400, 21211, "not a number")
    assert isinstance(classify_twilio_error(limited), RateLimited)
    error = classify_twilio_error(invalid)
    assert isinstance(error, PermanentSendError)
    assert error.code == "21211" and "not a number" in str(error)


def test_other_4xx_are_permanent_and_408_is_not():
    other = TwilioRestException(400, "uri", "Unable to create record: bad", 21999, "POST")
    timeout = TwilioRestException(408, "uri", "Unable to create record: slow", 408, "POST")
    assert isinstance(classify_twilio_error(other), PermanentSendError)
    assert type(classify_twilio_error(timeout)) is TransientSendError


def test_429_with_an_http_date_waits_until_that_date(channel, fake_twilio, message):
    in_two_minutes = formatdate(time.time() + 120, usegmt=True)
    fake_twilio.plan.on_call(
        1, twilio.twilio_error(20429, "Too Many Requests", 429, retry_after=in_two_minutes)
    )
    with pytest.raises(RateLimited) as caught:
        channel.send("+15550001111", message)
    assert 110 <= caught.value.retry_after <= 120


def test_429_with_an_unusable_retry_after_waits_a_minute(channel, fake_twilio, message):
    fake_twilio.plan.on_call(
        1, twilio.twilio_error(20429, "Too Many Requests", 429, retry_after="soon")
    )
    with pytest.raises(RateLimited) as caught:
        channel.send("+15550001111", message)
    assert caught.value.retry_after == 60


def test_a_late_answer_is_unconfirmed(twilio_settings, fake_twilio, message):
    twilio_settings.CHANNEL_TIMEOUT_SECONDS = 0.3
    fake_twilio.plan.on_call(1, twilio.slow(3))
    with pytest.raises(UnconfirmedSendError) as caught:
        WhatsAppChannel().send("+15550001111", message)
    assert caught.value.code == "timeout"


def test_connection_refused_is_transient(twilio_settings, message):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    twilio_settings.TWILIO_API_BASE_URL = f"http://127.0.0.1:{port}"
    with pytest.raises(TransientSendError) as caught:
        WhatsAppChannel().send("+15550001111", message)
    assert caught.value.code == "network"


@pytest.mark.parametrize(
    "missing", ["TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "TWILIO_WHATSAPP_FROM"]
)
def test_missing_credentials_are_permanent_and_never_quote_the_token(
    twilio_settings, fake_twilio, message, missing
):
    setattr(twilio_settings, missing, "")
    with pytest.raises(PermanentSendError) as caught:
        WhatsAppChannel().send("+15550001111", message)
    assert missing in str(caught.value)
    assert AUTH_TOKEN not in caught.value.describe()
    assert fake_twilio.requests == []


def test_logs_of_failing_sends_never_contain_the_auth_token(
    twilio_settings, fake_twilio, message, caplog
):
    caplog.set_level(logging.DEBUG)
    fake_twilio.plan.on_call(1, twilio.SERVER_ERROR).on_call(2, twilio.INVALID_TO)
    fake_twilio.plan.on_call(3, twilio.TOO_MANY_REQUESTS)
    channel = WhatsAppChannel()
    errors = []
    for _ in range(3):
        try:
            channel.send("+15550001111", message)
        except (TransientSendError, PermanentSendError) as exc:
            logging.getLogger("nudge.deliver").exception("send failed: %s", exc.describe())
            errors.append(exc)
    assert len(errors) == 3
    assert caplog.records, "nothing was logged: the test would prove nothing"
    assert AUTH_TOKEN not in caplog.text
    for exc in errors:
        assert AUTH_TOKEN not in repr(exc.__cause__) and AUTH_TOKEN not in str(exc.__cause__)


def test_base_url_keeps_path_and_query(fake_twilio: FakeTwilio):
    from messaging.whatsapp.send import BaseUrlHttpClient

    client = BaseUrlHttpClient(fake_twilio.url + "/proxy/")
    assert (
        client.rewrite("https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json?x=1")
        == f"{fake_twilio.url}/proxy/2010-04-01/Accounts/AC1/Messages.json?x=1"
    )
    assert BaseUrlHttpClient("").rewrite("https://api.twilio.com/a") == "https://api.twilio.com/a"


@pytest.mark.parametrize(
    "fault",
    [
        Fault("int-sid", 201, {"sid": 12345, "status": "queued"}),
        Fault("no-sid", 201, {"status": "queued"}),
        Fault("not-json", 201, "<html>accepted?</html>"),
        Fault("list", 201, ["a", "list"]),
    ],
    ids=lambda fault: fault.name,
)
def test_an_unreadable_acceptance_is_not_resent(channel, fake_twilio, message, fault):
    """2xx means Twilio has it: a duplicate is worse than a visible miss."""
    fake_twilio.plan.on_call(1, fault)
    with pytest.raises(PermanentSendError) as caught:
        channel.send("+15550001111", message)
    assert caught.value.code == "protocol"
    assert "not resent" in str(caught.value)


def test_an_unusable_base_url_is_a_configuration_error(twilio_settings, message):
    twilio_settings.TWILIO_API_BASE_URL = "ftp://127.0.0.1:1"
    with pytest.raises(PermanentSendError) as caught:
        WhatsAppChannel().send("+15550001111", message)
    assert caught.value.code == "config"
