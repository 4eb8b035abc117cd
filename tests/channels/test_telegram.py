"""TelegramChannel against the fake Bot API, through the real python-telegram-bot."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from messaging.channels.base import (
    PermanentSendError,
    RateLimited,
    TransientSendError,
    UnconfirmedSendError,
)
from messaging.telegram.send import REDACTED, TelegramChannel
from tests.channels.conftest import nudge
from tests.fakes import telegram_server as telegram
from tests.fakes.base import Fault
from tests.fakes.telegram_server import BOT_TOKEN

MARKUP_TITLE = "*_[]()~`>#+-=|{}.!<b>&amp;"


@pytest.fixture
def channel(telegram_settings):
    channel = TelegramChannel()
    yield channel
    channel.close()


def test_sends_plain_text_without_previews_and_returns_chat_and_message_id(
    channel, fake_telegram, message
):
    receipt = channel.send("1001", message)

    [delivered] = fake_telegram.delivered
    assert receipt.provider_message_id == delivered.message_id == "1001:1"
    assert delivered.text == message.text
    assert "parse_mode" not in delivered.params
    assert json.loads(delivered.params["link_preview_options"]) == {"is_disabled": True}


def test_markup_in_the_title_arrives_byte_for_byte(channel, fake_telegram):
    message = nudge(title=MARKUP_TITLE)
    channel.send("1001", message)

    [delivered] = fake_telegram.delivered
    assert delivered.text.encode() == message.text.encode()
    assert MARKUP_TITLE in delivered.text
    assert "parse_mode" not in delivered.params
    assert "entities" not in delivered.params


def test_get_me_happens_once_per_instance_and_one_loop_serves_every_send(
    channel, fake_telegram, message
):
    for chat in ("1001", "1002", "1001"):
        channel.send(chat, message)
    loop = channel._loop

    assert len(fake_telegram.calls("getMe")) == 1
    assert len(fake_telegram.calls("sendMessage")) == 3
    assert [d.message_id for d in fake_telegram.delivered] == ["1001:1", "1002:1", "1001:2"]
    channel.close()
    assert loop is not None and loop.is_closed()
    assert channel._loop is None


def test_a_closed_channel_can_send_again_on_a_new_loop(channel, fake_telegram, message):
    channel.send("1001", message)
    channel.close()
    channel.send("1001", message)
    assert len(fake_telegram.delivered) == 2
    assert len(fake_telegram.calls("getMe")) == 2


def test_close_without_sending_is_harmless(telegram_settings):
    TelegramChannel().close()


@pytest.mark.parametrize(
    ("fault", "code", "words"),
    [
        (telegram.CHAT_NOT_FOUND, "400", "chat not found"),
        (telegram.BOT_BLOCKED, "403", "bot was blocked by the user"),
        (telegram.BOT_KICKED, "403", "kicked"),
    ],
)
def test_permanent_errors(channel, fake_telegram, message, fault, code, words):
    fake_telegram.plan.for_recipient("2002", fault)
    with pytest.raises(PermanentSendError) as caught:
        channel.send("2002", message)
    assert caught.value.code == code
    assert words in str(caught.value).lower()
    channel.send("3003", message)  # the channel still works for others
    assert [d.recipient for d in fake_telegram.delivered] == ["3003"]


def test_flood_control_is_a_rate_limit_with_telegrams_retry_after(channel, fake_telegram, message):
    fake_telegram.plan.on_call(1, telegram.flood(13))
    with pytest.raises(RateLimited) as caught:
        channel.send("1001", message)
    assert caught.value.retry_after == 13
    assert caught.value.code == "429"


@pytest.mark.parametrize("fault", [telegram.SERVER_ERROR, telegram.BAD_GATEWAY])
def test_server_errors_are_transient(channel, fake_telegram, message, fault):
    fake_telegram.plan.on_call(1, fault)
    with pytest.raises(TransientSendError) as caught:
        channel.send("1001", message)
    assert not isinstance(caught.value, RateLimited)
    channel.send("1001", message)
    assert len(fake_telegram.delivered) == 1


def test_a_late_answer_is_unconfirmed(telegram_settings, fake_telegram, message):
    telegram_settings.CHANNEL_TIMEOUT_SECONDS = 0.3
    fake_telegram.plan.on_call(1, telegram.slow(3))
    channel = TelegramChannel()
    try:
        with pytest.raises(UnconfirmedSendError) as caught:
            channel.send("1001", message)
        assert caught.value.code == "timeout"
    finally:
        channel.close()


def test_unreachable_server_is_transient(telegram_settings, message):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    telegram_settings.TELEGRAM_API_BASE_URL = f"http://127.0.0.1:{port}/bot"
    channel = TelegramChannel()
    try:
        with pytest.raises(TransientSendError) as caught:
            channel.send("1001", message)
        assert caught.value.code in {"network", "timeout"}
        assert BOT_TOKEN not in caught.value.describe()
    finally:
        channel.close()


def test_invalid_token_is_permanent_and_never_quoted(telegram_settings, fake_telegram, message):
    wrong = "987654321:AAWrongTokenWrongTokenWrongToken00"
    telegram_settings.TELEGRAM_BOT_TOKEN = wrong
    channel = TelegramChannel()
    try:
        with pytest.raises(PermanentSendError) as caught:
            channel.send("1001", message)
    finally:
        channel.close()
    assert caught.value.code == "401"
    assert wrong not in caught.value.describe()
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert fake_telegram.delivered == []


def test_missing_token_is_permanent(telegram_settings, fake_telegram, message):
    telegram_settings.TELEGRAM_BOT_TOKEN = ""
    with pytest.raises(PermanentSendError, match="TELEGRAM_BOT_TOKEN"):
        TelegramChannel().send("1001", message)
    assert fake_telegram.requests == []


def test_no_log_record_carries_the_token_even_at_debug(
    telegram_settings, fake_telegram, message, caplog
):
    """The library logs the API URL (token included) at DEBUG; the channel redacts it."""
    caplog.set_level(logging.DEBUG)
    for name in ("telegram", "httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)
    fake_telegram.plan.on_call(1, telegram.SERVER_ERROR).on_call(2, telegram.CHAT_NOT_FOUND)
    fake_telegram.plan.on_call(3, telegram.FLOOD)
    channel = TelegramChannel()
    try:
        for _ in range(4):
            try:
                channel.send("1001", message)
            except (TransientSendError, PermanentSendError) as exc:
                logging.getLogger("nudge.deliver").exception("send failed: %s", exc.describe())
    finally:
        channel.close()
    assert len(fake_telegram.delivered) == 1
    assert any(r.name.startswith("telegram") for r in caplog.records), "nothing to inspect"
    assert any(r.name == "httpx" for r in caplog.records), "nothing to inspect"
    assert BOT_TOKEN not in caplog.text
    assert REDACTED in caplog.text  # the URL was logged, without its secret


@pytest.mark.parametrize(
    "fault",
    [
        Fault("no-message-id", 200, {"ok": True, "result": {"date": 0}}),
        Fault("result-string", 200, {"ok": True, "result": "a string"}),
        Fault("no-result", 200, {"ok": True}),
        Fault("html", 200, "<html>proxy</html>"),
    ],
    ids=lambda fault: fault.name,
)
def test_an_unreadable_acceptance_is_not_resent(channel, fake_telegram, message, fault):
    """200 means Telegram has it: a duplicate is worse than a visible miss."""
    channel.send("1001", message)  # getMe and a first message go through
    fake_telegram.plan.on_call(2, fault)
    with pytest.raises(PermanentSendError) as caught:
        channel.send("1001", message)
    assert caught.value.code == "protocol"
    assert BOT_TOKEN not in caught.value.describe()
    channel.send("1001", message)  # and the channel still works
    assert len(fake_telegram.sends()) == 3
