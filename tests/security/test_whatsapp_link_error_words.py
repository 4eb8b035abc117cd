"""Issue 34, item 6: a failed WhatsApp link tells the person what they can do, in
plain words; what went wrong (Twilio's error, the settings to check) is logged."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from messaging.whatsapp import inbound as whatsapp
from tenancy.scope import tenant_scope
from tests.fakes.twilio_server import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    INVALID_TO,
    UNSUBSCRIBED,
    twilio_error,
)
from tests.portal.test_whatsapp import NUMBER

SETTING_NAMES = ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "TWILIO_")
NOT_WORKING = "WhatsApp linking is not working on this server right now; try again later."


def ask_for_code(client) -> str:
    response = client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
    assert response.status_code == 200  # the settings page again, with the form's error
    return response.content.decode()


def test_rejected_credentials_are_plain_words_on_the_page_and_setting_names_in_the_log(
    wa, fake_twilio, signed_in, caplog
):
    """issue 34 item 6 (the WhatsApp link error): Twilio's 20003 showed the person
    "check TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN"; now the page says linking is not
    working right now, and only the log names the settings."""
    _, client = signed_in("ana")
    fake_twilio.plan.for_recipient(f"whatsapp:{NUMBER}", twilio_error(20003, "Authenticate", 401))
    with caplog.at_level(logging.WARNING, logger="nudge.whatsapp"):
        page = ask_for_code(client)
    assert NOT_WORKING in page
    for name in SETTING_NAMES:
        assert name not in page
    assert "20003" not in page and "Twilio" not in page
    [record] = [r for r in caplog.records if r.name == "nudge.whatsapp"]
    assert "check TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN" in record.getMessage()
    assert AUTH_TOKEN not in caplog.text and ACCOUNT_SID not in caplog.text


def test_a_server_without_the_settings_says_so_in_the_log_only(wa, signed_in, caplog):
    """issue 34 item 6: asked for a code on a server missing a Twilio setting (by an
    older page), the page names no setting (its WhatsApp card says "not available");
    the error is the same plain sentence and the log lists the empty settings."""
    wa.TWILIO_CONFIRM_CONTENT_SID = ""
    user, client = signed_in("ana")
    with caplog.at_level(logging.WARNING, logger="nudge.whatsapp"):
        page = ask_for_code(client)
        with pytest.raises(whatsapp.WhatsAppLinkError) as refused:
            whatsapp.send_code(user.pk, NUMBER, timezone.now(), NudgeConfig.from_settings())
    assert "WhatsApp is not available on this server." in page
    assert "TWILIO_" not in page
    assert str(refused.value) == NOT_WORKING
    assert "TWILIO_CONFIRM_CONTENT_SID empty" in caplog.text


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (INVALID_TO, "WhatsApp could not reach that number. Check it, with its country code"),
        (UNSUBSCRIBED, "That number has stopped our WhatsApp messages. Send START to us"),
    ],
)
def test_what_the_person_can_fix_is_said_as_such(wa, fake_twilio, signed_in, answer, words):
    """issue 34 item 6: a refusal about the number itself tells the person what to do."""
    _, client = signed_in("ana")
    fake_twilio.plan.for_recipient(f"whatsapp:{NUMBER}", answer)
    page = ask_for_code(client)
    assert words in page
    assert "Twilio" not in page and "TWILIO_" not in page


def test_the_words_are_in_the_persons_language(wa, fake_twilio, signed_in):
    """issue 34 item 6: the sentence is translated like the rest of the settings page."""
    user, client = signed_in("lena")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language="de")
    fake_twilio.plan.for_recipient(f"whatsapp:{NUMBER}", twilio_error(20003, "Authenticate", 401))
    page = ask_for_code(client)
    assert "Das Verknüpfen mit WhatsApp funktioniert auf diesem Server gerade nicht" in page


def test_every_link_error_is_free_of_setting_names():
    """issue 34 item 6: none of the sentences a link error can carry names a setting."""
    for code in (0, 21211, 21610):
        assert "TWILIO" not in str(whatsapp.link_error(code))
