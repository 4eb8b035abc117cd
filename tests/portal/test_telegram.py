"""Linking Telegram: the webhook (secret header, real update shapes, replays),
long polling with the real python-telegram-bot against the fake Bot API,
and the webhook management command."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from messaging.addresses import new_telegram_code
from messaging.models import LinkCode, OptInRecord
from messaging.telegram import bot as telegram
from tenancy.scope import tenant_scope
from tests.fakes.telegram_server import FakeTelegram

from .conftest import BOT_USERNAME, WEBHOOK_SECRET, pending

CHAT = 5550001


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user_id=user.pk)


def link_code(client) -> str:
    """Press "Link Telegram": the waiting page's t.me link carries the one-time payload."""
    response = client.post(reverse("portal:link_telegram"))
    assert response.status_code == 200
    prefix = f"https://t.me/{BOT_USERNAME}?start="
    found = re.search(re.escape(prefix) + r'([^"]+)"', response.content.decode())
    assert found is not None
    return found.group(1)


def post_update(client, update: dict, secret: str | None = WEBHOOK_SECRET):
    headers = {} if secret is None else {"HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN": secret}
    return client.post(
        reverse("telegram-webhook"), json.dumps(update), content_type="application/json", **headers
    )


@pytest.fixture
def updates():
    """Updates shaped by the fake Bot API (without serving them)."""
    return FakeTelegram()


def test_start_with_the_code_links_the_chat_and_answers(bot, signed_in, updates, client):
    user, browser = signed_in("ana")
    code = link_code(browser)
    assert len(code) <= 64
    response = post_update(client, updates.push_message(CHAT, f"/start {code}"))
    assert response.status_code == 200
    assert response.json() == {"method": "sendMessage", "chat_id": CHAT, "text": telegram.LINKED}
    linked = settings_of(user)
    assert (linked.channel, linked.telegram_chat_id) == ("telegram", str(CHAT))
    with tenant_scope(user.pk):
        [record] = OptInRecord.objects.filter(user_id=user.pk)
    assert (record.channel, record.address) == ("telegram", str(CHAT))
    assert b"Linked to a Telegram chat" in browser.get(reverse("portal:settings")).content


@pytest.mark.parametrize("secret", [None, "", "wrong", WEBHOOK_SECRET + "x", "ü" * 10])
def test_a_missing_or_wrong_secret_header_is_refused_and_changes_nothing(
    bot, signed_in, updates, client, secret
):
    user, browser = signed_in("ana")
    code = link_code(browser)
    response = post_update(client, updates.push_message(CHAT, f"/start {code}"), secret=secret)
    assert response.status_code == 403
    assert settings_of(user).telegram_chat_id == ""


def test_the_webhook_is_off_without_a_configured_secret(bot, updates, client, db):
    bot.TELEGRAM_WEBHOOK_SECRET = ""
    assert post_update(client, updates.push_message(CHAT, "/stop"), secret="").status_code == 403


def test_a_replayed_update_does_nothing_twice(bot, signed_in, updates, client):
    user, browser = signed_in("ana")
    update = updates.push_message(CHAT, f"/start {link_code(browser)}")
    assert post_update(client, update).json()["text"] == telegram.LINKED
    # Replays (Telegram's retry, or an attacker holding the body) get no answer and no effect.
    assert post_update(client, update).content == b""
    with tenant_scope(user.pk):
        assert OptInRecord.objects.filter(user_id=user.pk).count() == 1


def test_a_code_works_once_and_expires(bot, signed_in, updates, client, settings):
    user, browser = signed_in("ana")
    code = link_code(browser)
    post_update(client, updates.push_message(CHAT, f"/start {code}"))
    # Same code, another chat: refused.
    again = post_update(client, updates.push_message(CHAT + 1, f"/start {code}"))
    assert again.json()["text"] == telegram.BAD_CODE
    assert settings_of(user).telegram_chat_id == str(CHAT)
    # An expired code links nothing.
    with tenant_scope(user.pk):
        stale = new_telegram_code(
            user.pk, timezone.now() - timedelta(minutes=60), NudgeConfig.from_settings()
        )
    late = post_update(client, updates.push_message(CHAT + 2, f"/start {stale}"))
    assert late.json()["text"] == telegram.BAD_CODE
    assert settings_of(user).telegram_chat_id == str(CHAT)


@pytest.mark.parametrize("payload", ["garbage", "1-short", "99999-" + "a" * 32, "0-" + "a" * 32])
def test_forged_payloads_link_nothing(bot, signed_in, updates, client, payload):
    _user, _ = signed_in("ana")
    response = post_update(client, updates.push_message(CHAT, f"/start {payload}"))
    assert response.json()["text"] == telegram.BAD_CODE


def test_stop_pauses_and_clears_the_queue_and_start_resumes(bot, signed_in, updates, client):
    user, browser = signed_in("ana")
    post_update(client, updates.push_message(CHAT, f"/start {link_code(browser)}"))
    browser.post(
        reverse("portal:follow_ups"),
        {
            "title": "Water plants",
            "due_at": (timezone.now() + timedelta(minutes=40)).strftime("%Y-%m-%dT%H:%M"),
        },
    )
    assert len(pending(user)) == 1
    assert (
        post_update(client, updates.push_message(CHAT, "/stop")).json()["text"] == telegram.PAUSED
    )
    paused = settings_of(user)
    assert paused.paused and "/stop" in paused.paused_reason
    assert pending(user) == []
    assert b"you sent /stop to the bot in Telegram" in browser.get(reverse("portal:home")).content
    assert (
        post_update(client, updates.push_message(CHAT, "/start")).json()["text"] == telegram.RESUMED
    )
    assert not settings_of(user).paused
    assert len(pending(user)) == 1


def test_stop_from_an_unknown_chat_touches_nobody(bot, signed_in, updates, client):
    user, browser = signed_in("ana")
    post_update(client, updates.push_message(CHAT, f"/start {link_code(browser)}"))
    answer = post_update(client, updates.push_message(CHAT + 9, "/stop")).json()
    assert answer["text"] == telegram.NOT_LINKED
    assert not settings_of(user).paused


def test_long_polling_links_through_the_real_client(bot, fake_telegram, signed_in):
    user, browser = signed_in("ana")
    fake_telegram.push_message(CHAT, f"/start {link_code(browser)}")
    call_command("telegram_poll", "--once", "--timeout", "0")
    assert settings_of(user).telegram_chat_id == str(CHAT)
    [reply] = fake_telegram.delivered_to(str(CHAT))
    assert reply.text == telegram.LINKED
    # The next round confirms the update (offset), so it is not handled again.
    call_command("telegram_poll", "--once", "--timeout", "0")
    assert len(fake_telegram.delivered_to(str(CHAT))) == 1
    assert fake_telegram.updates == []


def test_webhook_command_sets_shows_and_deletes(bot, fake_telegram, capsys, db):
    with pytest.raises(CommandError, match="https://"):
        call_command("telegram_webhook", "set", "--url", "http://insecure.example/telegram/webhook")
    call_command("telegram_webhook", "set", "--url", "https://nudge.example/telegram/webhook")
    assert fake_telegram.webhook["secret_token"] == WEBHOOK_SECRET
    call_command("telegram_webhook", "info")
    assert "url https://nudge.example/telegram/webhook" in capsys.readouterr().out
    # getUpdates cannot be used while a webhook is set: said in one line.
    with pytest.raises(CommandError, match="Conflict"):
        call_command("telegram_poll", "--once", "--timeout", "0")
    call_command("telegram_webhook", "delete")
    assert fake_telegram.webhook == {}


def test_webhook_command_refuses_a_secret_telegram_would_refuse(bot, fake_telegram, db):
    bot.TELEGRAM_WEBHOOK_SECRET = "has spaces!"
    with pytest.raises(CommandError, match="1-256 characters"):
        call_command("telegram_webhook", "set", "--url", "https://nudge.example/telegram/webhook")
    assert fake_telegram.calls("setWebhook") == []


def test_link_codes_are_stored_only_as_digests(bot, signed_in):
    user, browser = signed_in("ana")
    code = link_code(browser)
    with tenant_scope(user.pk):
        [stored] = LinkCode.objects.filter(user_id=user.pk)
    assert code.split("-", 1)[1] not in stored.secret_digest


def test_stop_from_a_linked_chat_pauses_even_when_nudges_go_elsewhere(
    bot, signed_in, updates, client
):
    user, browser = signed_in("ana")
    post_update(client, updates.push_message(CHAT, f"/start {link_code(browser)}"))
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            channel="whatsapp", whatsapp_number="+15550100200"
        )
    assert (
        post_update(client, updates.push_message(CHAT, "/stop")).json()["text"] == telegram.PAUSED
    )
    assert settings_of(user).paused
