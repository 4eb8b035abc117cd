"""POST /twilio/status: signed receipts move a row's delivery status forward; nothing else does."""

from __future__ import annotations

import pytest
from django.utils import timezone
from twilio.request_validator import RequestValidator

from sweeps.deliver import run_deliver
from tests.channels.queue import queue_follow_up, reload
from tests.fakes.twilio_server import ACCOUNT_SID, AUTH_TOKEN

pytestmark = pytest.mark.django_db

LOCAL_URL = "https://testserver/twilio/status"
PUBLIC_URL = "https://nudge.example/twilio/status"


@pytest.fixture
def sent_row(twilio_settings, make_user, fake_twilio):
    """A WhatsApp nudge really sent through the sweep, so it holds a real SM… sid."""
    now = timezone.now().replace(microsecond=0)
    user = make_user(channel="whatsapp", whatsapp_number="+15550001111")
    row = queue_follow_up(user, "Review", now=now)
    assert run_deliver(now).sent == 1
    row = reload(row)
    assert row.provider_message_id.startswith("SM")
    return row


def receipt(row, status: str, error_code: str = "") -> dict[str, str]:
    params = {
        "AccountSid": ACCOUNT_SID,
        "MessageSid": row.provider_message_id,
        "SmsSid": row.provider_message_id,
        "MessageStatus": status,
        "SmsStatus": status,
        "To": "whatsapp:+15550001111",
        "From": "whatsapp:+14155238886",
        "ApiVersion": "2010-04-01",
        "ChannelPrefix": "whatsapp",
    }
    if error_code:
        params["ErrorCode"] = error_code
    return params


def post(client, params: dict[str, str], *, signed_for: str | None = LOCAL_URL, token=AUTH_TOKEN):
    headers = {}
    if signed_for is not None:
        headers["X-Twilio-Signature"] = RequestValidator(token).compute_signature(
            signed_for, params
        )
    return client.post("/twilio/status", params, secure=True, headers=headers)


def test_a_signed_receipt_updates_the_row(client, sent_row):
    response = post(client, receipt(sent_row, "delivered"))
    assert response.status_code == 204
    row = reload(sent_row)
    assert row.delivery_status == "delivered"
    assert row.delivery_error_code == ""
    assert row.delivery_updated_at is not None
    assert row.outcome == "sent"  # the receipt is about delivery, not the send


def test_a_failure_receipt_records_the_error_code(client, sent_row):
    post(client, receipt(sent_row, "undelivered", "63016"))
    row = reload(sent_row)
    assert (row.delivery_status, row.delivery_error_code) == ("undelivered", "63016")
    assert (row.outcome, row.failure_kind) == ("sent", "undelivered")


def test_a_later_read_receipt_clears_the_undelivered_kind(client, sent_row):
    post(client, receipt(sent_row, "failed", "30008"))
    assert reload(sent_row).failure_kind == "undelivered"
    post(client, receipt(sent_row, "read"))
    assert (reload(sent_row).delivery_status, reload(sent_row).failure_kind) == ("read", "")


def test_statuses_only_move_forward(client, sent_row):
    for status in ("sent", "delivered", "read"):
        assert post(client, receipt(sent_row, status)).status_code == 204
    post(client, receipt(sent_row, "sent"))  # late, out of order
    post(client, receipt(sent_row, "delivered"))
    assert reload(sent_row).delivery_status == "read"


def test_a_late_failure_of_the_same_rank_does_not_overwrite_delivered(client, sent_row):
    post(client, receipt(sent_row, "delivered"))
    post(client, receipt(sent_row, "failed", "30008"))
    row = reload(sent_row)
    assert (row.delivery_status, row.delivery_error_code, row.failure_kind) == ("delivered", "", "")


@pytest.mark.parametrize(
    "how",
    ["missing", "wrong-token", "other-url", "tampered"],
)
def test_bad_or_missing_signature_is_refused_and_changes_nothing(client, sent_row, how):
    params = receipt(sent_row, "delivered")
    if how == "missing":
        response = post(client, params, signed_for=None)
    elif how == "wrong-token":
        response = post(client, params, token="not-our-token")
    elif how == "other-url":
        response = post(client, params, signed_for="https://attacker.example/twilio/status")
    else:
        signature = RequestValidator(AUTH_TOKEN).compute_signature(LOCAL_URL, params)
        params["MessageStatus"] = "failed"
        response = client.post(
            "/twilio/status", params, secure=True, headers={"X-Twilio-Signature": signature}
        )
    assert response.status_code == 403
    row = reload(sent_row)
    assert (row.delivery_status, row.delivery_error_code) == ("", "")
    assert row.delivery_updated_at is None


def test_the_configured_public_url_is_what_the_signature_covers(client, sent_row, twilio_settings):
    """Behind a proxy the request's own URL is not the one Twilio signed."""
    twilio_settings.TWILIO_STATUS_CALLBACK_URL = PUBLIC_URL
    assert post(client, receipt(sent_row, "sent"), signed_for=LOCAL_URL).status_code == 403
    assert post(client, receipt(sent_row, "sent"), signed_for=PUBLIC_URL).status_code == 204
    assert reload(sent_row).delivery_status == "sent"


def test_without_an_auth_token_every_receipt_is_refused(client, sent_row, twilio_settings):
    params = receipt(sent_row, "delivered")
    twilio_settings.TWILIO_AUTH_TOKEN = ""
    assert post(client, params).status_code == 403
    assert reload(sent_row).delivery_status == ""


def test_only_post_is_allowed(client, twilio_settings):
    assert client.get("/twilio/status", secure=True).status_code == 405


def test_unknown_status_or_sid_is_acknowledged_and_ignored(client, sent_row):
    assert post(client, receipt(sent_row, "exploded")).status_code == 204
    assert reload(sent_row).delivery_status == ""
    params = receipt(sent_row, "delivered") | {"MessageSid": "SM" + "0" * 32}
    assert post(client, params).status_code == 204
    assert reload(sent_row).delivery_status == ""
