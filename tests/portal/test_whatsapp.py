"""Linking WhatsApp: a code through the approved template (real twilio client,
fake Twilio), typed back on the website; inbound STOP / START on a webhook
signed the way Twilio signs it (``RequestValidator``)."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from twilio.request_validator import RequestValidator

from accounts.models import DeliverySettings
from messaging.models import OptInRecord
from tenancy.scope import tenant_scope
from tests.fakes.fixtures import WHATSAPP_FROM
from tests.fakes.twilio_server import ACCOUNT_SID, AUTH_TOKEN, INVALID_TO

from .conftest import local_input, pending

NUMBER = "+4915112345678"
TEMPLATE = "HX" + "c0de" * 8
INBOUND_URL = "https://nudge.example/twilio/inbound"


@pytest.fixture
def wa(twilio_settings):
    twilio_settings.TWILIO_CONFIRM_CONTENT_SID = TEMPLATE
    twilio_settings.TWILIO_INBOUND_URL = INBOUND_URL
    return twilio_settings


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user_id=user.pk)


def sent_code(fake_twilio) -> str:
    last = fake_twilio.delivered[-1]
    assert last.params["ContentSid"] == TEMPLATE
    return json.loads(last.params["ContentVariables"])["1"]


def link(client, fake_twilio, number: str = NUMBER):
    client.post(reverse("portal:whatsapp_number"), {"number": number})
    return client.post(reverse("portal:whatsapp_code"), {"code": sent_code(fake_twilio)})


def inbound(number: str, body: str, **extra: str) -> dict[str, str]:
    """The form Twilio posts for an inbound WhatsApp message."""
    sid = "SM" + secrets.token_hex(16)
    return {
        "SmsMessageSid": sid,
        "NumMedia": "0",
        "ProfileName": "Ana",
        "MessageType": "text",
        "SmsSid": sid,
        "WaId": number.lstrip("+"),
        "SmsStatus": "received",
        "Body": body,
        "To": f"whatsapp:{WHATSAPP_FROM}",
        "NumSegments": "1",
        "ReferralNumMedia": "0",
        "MessageSid": sid,
        "AccountSid": ACCOUNT_SID,
        "From": f"whatsapp:{number}",
        "ApiVersion": "2010-04-01",
        **extra,
    }


def post_inbound(
    client, params: dict[str, str], *, url: str = INBOUND_URL, token: str = AUTH_TOKEN
):
    signature = RequestValidator(token).compute_signature(url, params)
    return client.post(reverse("twilio-inbound"), params, HTTP_X_TWILIO_SIGNATURE=signature)


def test_code_through_the_template_then_confirmed_links_the_number(wa, fake_twilio, signed_in):
    user, client = signed_in("ana")
    response = client.post(reverse("portal:whatsapp_number"), {"number": NUMBER}, follow=True)
    assert b"We sent a six-digit code" in response.content
    [message] = fake_twilio.delivered
    assert message.recipient == f"whatsapp:{NUMBER}"
    code = sent_code(fake_twilio)
    assert len(code) == 6 and code.isdigit()
    confirmed = client.post(reverse("portal:whatsapp_code"), {"code": code}, follow=True)
    assert b"WhatsApp confirmed" in confirmed.content
    linked = settings_of(user)
    assert (linked.channel, linked.whatsapp_number) == ("whatsapp", NUMBER)
    assert linked.whatsapp_opted_in_at is not None
    with tenant_scope(user.pk):
        [record] = OptInRecord.objects.filter(user_id=user.pk)
    assert (record.channel, record.address) == ("whatsapp", NUMBER)
    assert "entered the code" in record.method


@pytest.mark.parametrize(
    "number", ["015112345678", "+49 151 12ab", "+٤٩١٥١١٢٣٤٥٦٧٨", "whatsapp:+1"]
)
def test_numbers_not_in_e164_are_refused_before_anything_is_sent(
    wa, fake_twilio, signed_in, number
):
    _, client = signed_in("ana")
    response = client.post(reverse("portal:whatsapp_number"), {"number": number})
    # Said with an example number (issue 24), not "E.164".
    assert b"for example +44 7700 900123" in response.content
    assert fake_twilio.requests == []


def test_a_number_written_with_spaces_and_dashes_is_read_as_digits(wa, fake_twilio, signed_in):
    """Issue 24, users see sentences: a number as people write it is accepted."""
    _, client = signed_in("ana")
    spaced = f"{NUMBER[:3]} {NUMBER[3:6]}-{NUMBER[6:]}"
    response = client.post(reverse("portal:whatsapp_number"), {"number": spaced})
    assert response.status_code == 302
    assert len(fake_twilio.requests) == 1


def test_wrong_codes_are_counted_and_then_nothing_works(wa, fake_twilio, signed_in):
    user, client = signed_in("ana")
    client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
    code = sent_code(fake_twilio)
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    for _ in range(5):
        response = client.post(reverse("portal:whatsapp_code"), {"code": wrong})
        assert b"wrong or has expired" in response.content
    client.post(reverse("portal:whatsapp_code"), {"code": code})
    assert settings_of(user).whatsapp_number == ""


def test_a_code_for_another_users_pending_number_does_not_work(wa, fake_twilio, signed_in):
    _ana, ana_client = signed_in("ana")
    bob, bob_client = signed_in("bob")
    ana_client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
    ana_code = sent_code(fake_twilio)
    bob_client.post(reverse("portal:whatsapp_number"), {"number": "+15550100200"})
    bob_client.post(reverse("portal:whatsapp_code"), {"code": ana_code})
    assert settings_of(bob).whatsapp_number == ""


def test_twilio_refusing_the_number_is_shown_to_the_user(wa, fake_twilio, signed_in):
    _, client = signed_in("ana")
    fake_twilio.plan.for_recipient(f"whatsapp:{NUMBER}", INVALID_TO)
    response = client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
    assert b"WhatsApp could not reach that number. Check it" in response.content
    assert b"21211" not in response.content  # Twilio's code is for the log, not the person


def test_stop_pauses_start_resumes_and_replays_are_harmless(wa, fake_twilio, signed_in):
    user, client = signed_in("ana")
    link(client, fake_twilio)
    client.post(
        reverse("portal:follow_ups"),
        {
            "title": "Pick up parcel",
            "due_at": local_input(timezone.now() + timedelta(hours=1), UTC),
        },
    )
    assert len(pending(user)) == 1
    stop = inbound(NUMBER, "Stop", OptOutType="STOP")
    response = post_inbound(client, stop)
    assert response.status_code == 200 and b"<Response>" in response.content
    paused = settings_of(user)
    assert paused.paused and paused.paused_reason == "you replied STOP on WhatsApp"
    assert pending(user) == []
    with tenant_scope(user.pk):
        record = OptInRecord.objects.get(user_id=user.pk)
    assert record.withdrawn_at is not None
    # Twilio retries, and a replayed body, change nothing further.
    assert post_inbound(client, stop).status_code == 200
    assert settings_of(user).paused_at == paused.paused_at
    post_inbound(client, inbound(NUMBER, "START"))
    assert not settings_of(user).paused
    assert len(pending(user)) == 1
    with tenant_scope(user.pk):
        assert OptInRecord.objects.filter(user_id=user.pk, withdrawn_at=None).count() == 1


@pytest.mark.parametrize("word", ["STOP", "unsubscribe", "Cancel", "end", "QUIT", "stopall"])
def test_stop_synonyms_pause(wa, fake_twilio, signed_in, word):
    user, client = signed_in("ana")
    link(client, fake_twilio)
    post_inbound(client, inbound(NUMBER, word))
    assert settings_of(user).paused


def test_other_messages_change_nothing(wa, fake_twilio, signed_in):
    user, client = signed_in("ana")
    link(client, fake_twilio)
    post_inbound(client, inbound(NUMBER, "please stop sending me cat pictures"))
    assert not settings_of(user).paused


@pytest.mark.parametrize("case", ["no signature", "wrong token", "other url", "tampered body"])
def test_unsigned_or_wrongly_signed_requests_are_refused(wa, fake_twilio, signed_in, case):
    user, client = signed_in("ana")
    link(client, fake_twilio)
    params = inbound(NUMBER, "STOP")
    if case == "no signature":
        response = client.post(reverse("twilio-inbound"), params)
    elif case == "wrong token":
        response = post_inbound(client, params, token="not-the-auth-token")
    elif case == "other url":
        response = post_inbound(client, params, url="https://evil.example/twilio/inbound")
    else:
        signature = RequestValidator(AUTH_TOKEN).compute_signature(INBOUND_URL, params)
        params["From"] = "whatsapp:+15550000000"
        response = client.post(reverse("twilio-inbound"), params, HTTP_X_TWILIO_SIGNATURE=signature)
    assert response.status_code == 403
    assert not settings_of(user).paused


def test_stop_from_a_number_the_user_replaced_does_nothing(wa, fake_twilio, signed_in):
    user, client = signed_in("ana")
    link(client, fake_twilio)
    link(client, fake_twilio, "+15550100200")
    post_inbound(client, inbound(NUMBER, "STOP"))
    assert not settings_of(user).paused


def test_codes_are_limited_per_hour_and_only_the_latest_works(wa, fake_twilio, signed_in):
    user, client = signed_in("ana")
    codes = []
    for _ in range(5):
        client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
        codes.append(sent_code(fake_twilio))
    response = client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
    assert b"Too many codes" in response.content
    assert len(fake_twilio.delivered) == 5
    if codes[0] != codes[-1]:
        client.post(reverse("portal:whatsapp_code"), {"code": codes[0]})
        assert settings_of(user).whatsapp_number == ""
    client.post(reverse("portal:whatsapp_code"), {"code": codes[-1]})
    assert settings_of(user).whatsapp_number == NUMBER


def test_support_reads_the_consent_record(wa, fake_twilio, signed_in, client):
    from django.contrib.auth import get_user_model

    _, user_client = signed_in("ana")
    link(user_client, fake_twilio)
    staff = get_user_model().objects.create_user("support", is_staff=True, is_superuser=True)
    client.force_login(staff)
    page = client.get("/admin/messaging/optinrecord/").content.decode()
    assert NUMBER in page and "entered the code" in page
