"""WhatsApp linking and inbound messages: replays, what the user is shown, what is kept."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from core.config import NudgeConfig
from messaging.models import LinkCode, TwilioMessageSeen
from messaging.whatsapp import inbound as whatsapp
from tenancy.scope import tenant_scope
from tests.fakes.twilio_server import ACCOUNT_SID, AUTH_TOKEN, twilio_error
from tests.portal.test_whatsapp import NUMBER, inbound, link, post_inbound, settings_of


def test_a_captured_signed_stop_replayed_after_start_changes_nothing(wa, fake_twilio, signed_in):
    """issue 23 item 8: a captured signed Twilio STOP could be replayed after START
    (no MessageSid de-duplication)."""
    user, client = signed_in("ana")
    link(client, fake_twilio)
    stop = inbound(NUMBER, "STOP")
    post_inbound(client, stop)
    assert settings_of(user).paused
    post_inbound(client, inbound(NUMBER, "START"))
    assert not settings_of(user).paused
    assert post_inbound(client, stop).status_code == 200  # Twilio gets its empty answer
    assert not settings_of(user).paused, "the replayed STOP paused the user again"
    assert TwilioMessageSeen.objects.filter(message_sid=stop["MessageSid"]).exists()


def test_old_message_ids_are_pruned(db):
    """issue 23 item 8: the replay table is kept small (pruned after NUDGE_INBOUND_SEEN_DAYS)."""
    now = timezone.now()
    TwilioMessageSeen.objects.create(message_sid="SM" + "0" * 32)
    TwilioMessageSeen.objects.filter().update(received_at=now - timedelta(days=91))
    assert whatsapp.first_time("SM" + "1" * 32, now, NudgeConfig.from_settings())
    assert list(TwilioMessageSeen.objects.values_list("message_sid", flat=True)) == [
        "SM" + "1" * 32
    ]
    assert not whatsapp.first_time("", now, NudgeConfig.from_settings())  # no sid, no action


def test_the_link_code_error_shown_to_the_user_is_redacted(wa, fake_twilio, signed_in, caplog):
    """issue 23 item 8: the WhatsApp link-code error shown to the user was not redacted
    the way delivery's errors are (Twilio's text may quote the credentials). Since
    issue 34 item 6 the page shows none of Twilio's text; the log has it, redacted."""
    _, client = signed_in("ana")
    fake_twilio.plan.for_recipient(
        f"whatsapp:{NUMBER}",
        twilio_error(20003, f"Authenticate: {ACCOUNT_SID} with token {AUTH_TOKEN} refused", 401),
    )
    page = client.post(reverse("portal:whatsapp_number"), {"number": NUMBER}).content.decode()
    assert "WhatsApp linking is not working on this server right now" in page
    assert AUTH_TOKEN not in page and ACCOUNT_SID not in page
    assert AUTH_TOKEN not in caplog.text and ACCOUNT_SID not in caplog.text
    assert "[redacted]" in caplog.text


def test_whatsapp_link_codes_are_pruned(wa, fake_twilio, signed_in):
    """issue 23 item 8: WhatsApp link codes (and the numbers typed) were never pruned."""
    user, client = signed_in("ana")
    client.post(reverse("portal:whatsapp_number"), {"number": NUMBER})
    with tenant_scope(user.pk):
        LinkCode.objects.filter(user_id=user.pk).update(
            created_at=timezone.now() - timedelta(days=2)
        )
    client.post(reverse("portal:whatsapp_number"), {"number": "+15550100200"})
    with tenant_scope(user.pk):
        kept = list(LinkCode.objects.filter(user_id=user.pk).values_list("address", flat=True))
    assert kept == ["+15550100200"]
