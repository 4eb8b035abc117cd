"""An address belongs to one consenting owner; support cannot point nudges anywhere;
no console channel outside development. Real webhook and delivery paths, fake providers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.actions import ensure_settings
from accounts.admin import DeliverySettingsForm
from accounts.models import DeliverySettings
from core.config import NudgeConfig
from core.deployment import NOT_IN_PRODUCTION
from followups import actions as followups
from messaging import addresses as account
from messaging.models import OptInRecord
from messaging.telegram import bot as telegram
from scheduled_sends.models import ScheduledSend
from sweeps.deliver import run_deliver
from tenancy.scope import tenant_scope
from tests.portal.conftest import pending, queued
from tests.portal.test_telegram import link_code, post_update

CHAT = 5550077


@pytest.fixture
def now():
    return timezone.now().replace(second=0, microsecond=0)


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user_id=user.pk)


def test_linking_a_chat_takes_it_from_the_other_account_and_tells_its_owner(
    bot, signed_in, fake_telegram, client, now
):
    """issue 23 item 3: a chat linked to A and then to B stays on A's settings, /stop
    pauses only B and A's nudges keep reaching the chat."""
    ana, ana_browser = signed_in("ana")
    bob, bob_browser = signed_in("bob")
    post_update(client, fake_telegram.push_message(CHAT, f"/start {link_code(ana_browser)}"))
    followups.create_follow_up(
        ana.pk, "Ana's private call", now + timedelta(minutes=20), now, NudgeConfig.from_settings()
    )
    assert len(pending(ana)) == 1

    post_update(client, fake_telegram.push_message(CHAT, f"/start {link_code(bob_browser)}"))

    held = settings_of(ana)
    assert (held.channel, held.telegram_chat_id) == ("", "")
    assert pending(ana) == []  # nothing of Ana's can reach Bob's chat any more
    with tenant_scope(ana.pk):
        [record] = OptInRecord.objects.filter(user_id=ana.pk)
    assert record.withdrawn_how == account.LINKED_ELSEWHERE
    page = ana_browser.get(reverse("portal:settings")).content.decode()
    assert "was linked to another nudge account" in page
    assert "bob" not in page  # the notice names no one
    bob_page = bob_browser.get(reverse("portal:settings")).content.decode()
    assert "was linked to another" not in bob_page
    # Stored in English for support; Ana reads the notice and her consent record in German.
    with tenant_scope(ana.pk):
        DeliverySettings.objects.filter(user_id=ana.pk).update(language="de")
    page = ana_browser.get(reverse("portal:settings")).content.decode()
    assert "Dein Telegram-Chat wurde mit einem anderen nudge-Konto verbunden." in page
    assert "hat den einmaligen Link an den Bot gesendet (/start)" in page
    assert "(mit einem anderen Konto verbunden)" in page
    assert "was linked to another" not in page and "linked to another account" not in page

    answer = post_update(client, fake_telegram.push_message(CHAT, "/stop")).json()
    assert answer["text"] == telegram.PAUSED
    assert settings_of(bob).paused
    assert not settings_of(ana).paused


def test_a_number_confirmed_by_another_account_leaves_the_first(signed_in, now):
    """issue 23 item 3: WhatsApp too — the later confirmation wins, the earlier owner is cleared."""
    ana, _ = signed_in("ana")
    bob, _ = signed_in("bob")
    number = "+4915112340000"
    account.link_address(ana.pk, "whatsapp", "test", now, lambda: number)
    account.link_address(bob.pk, "whatsapp", "test", now, lambda: number)
    assert settings_of(ana).whatsapp_number == ""
    assert settings_of(bob).whatsapp_number == number
    assert account.owner_of("whatsapp", number) == bob.pk
    assert account.stop_or_start("whatsapp", number, "stop", now).user_id == (bob.pk)


def admin_form(delivery: DeliverySettings, **changes) -> DeliverySettingsForm:
    data = {
        "user": delivery.user_id,
        "enabled": "on",
        "channel": delivery.channel,
        "whatsapp_number": delivery.whatsapp_number,
        "telegram_chat_id": delivery.telegram_chat_id,
        "timezone": delivery.timezone,
        "default_lead_minutes": delivery.default_lead_minutes,
        **changes,
    }
    return DeliverySettingsForm(data=data, instance=delivery)


def test_support_can_clear_an_address_but_never_set_or_change_one(signed_in, now):
    """issue 23 item 4: with "change delivery settings" staff could type any chat id or
    number into the admin form, without the recipient's consent."""
    ana, _ = signed_in("ana")
    account.link_address(ana.pk, "telegram", "test", now, lambda: "5550001")
    delivery = settings_of(ana)

    for field, value in (("telegram_chat_id", "5550002"), ("whatsapp_number", "+14155550100")):
        form = admin_form(delivery, **{field: value})
        assert not form.is_valid()
        assert "not set or change one" in str(form.errors[field])

    assert admin_form(delivery).is_valid()  # unchanged is fine
    cleared = admin_form(delivery, channel="", telegram_chat_id="")
    assert cleared.is_valid(), cleared.errors
    with tenant_scope(ana.pk):
        cleared.save()
    assert settings_of(ana).telegram_chat_id == ""


def test_settings_never_says_confirmed_without_an_opt_in_record(signed_in):
    """issue 23 item 4: an address set without the user's opt-in was shown as "Confirmed"."""
    ana, browser = signed_in("ana")
    with tenant_scope(ana.pk):
        ensure_settings(ana.pk)
        DeliverySettings.objects.filter(user_id=ana.pk).update(
            whatsapp_number="+14155550100", telegram_chat_id="5550009"
        )
    page = browser.get(reverse("portal:settings")).content.decode()
    assert "Confirmed:" not in page
    assert "Linked to a Telegram chat" not in page
    assert page.count("Not confirmed by you") == 2


def test_a_new_user_has_no_channel_and_nothing_is_planned(signed_in, now, recording_channel):
    """issue 23 item 6: a new user started on the console channel."""
    ana, browser = signed_in("ana", channel="")
    assert "Nudges are not set up yet" in browser.get(reverse("portal:home")).content.decode()
    assert settings_of(ana).channel == ""
    followups.create_follow_up(
        ana.pk, "Dentist", now + timedelta(minutes=20), now, NudgeConfig.from_settings()
    )
    assert queued(ana) == []
    page = browser.get(reverse("portal:settings")).content.decode()
    assert '<option value="" selected>Not set up yet' in page


def test_a_console_row_outside_development_is_skipped_with_a_reason(
    make_user, recording_channel, settings, now
):
    """issue 23 item 6: outside development deliver printed private titles into its log
    and recorded them "sent"."""
    user = make_user(channel="console")
    followups.create_follow_up(
        user.pk, "Private title", now + timedelta(minutes=10), now, NudgeConfig.from_settings()
    )
    [row] = pending(user)  # queued while in development
    settings.DEBUG = False
    settings.EMBEDDED_DATABASE = False  # a real deployment
    settings.ALLOW_CONSOLE_CHANNEL = False
    report = run_deliver(row.fire_at)
    assert (report.sent, report.skipped) == (0, 1)
    assert recording_channel.sent == []
    with tenant_scope(user.pk):
        row = ScheduledSend.objects.get(pk=row.pk)
    assert row.outcome == "skipped"
    assert NOT_IN_PRODUCTION in row.last_error
