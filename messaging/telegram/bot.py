"""The bot: linking (``/start <code>``, ``/stop``), the chat and buttons. Webhook updates
(answered in the response) and polled ones meet in :func:`handle_update`, once per update
id. A tap is always answered (else the button spins); one that changed something edits
the message to say so, keeping only its Join button.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import segno
from django.conf import settings
from django.db.models import Max
from django.utils.translation import gettext_lazy, gettext_noop, override
from telegram import (
    BotCommand,
    CallbackQuery,
    InlineKeyboardMarkup,
    Message,
    TelegramObject,
    Update,
)

from accounts.actions import in_their_language
from accounts.models import Channel
from core.config import NudgeConfig
from messaging import addresses, chat, chat_words
from messaging.chat_words import Button
from messaging.messages import LANGUAGES
from messaging.models import LinkCode, TelegramUpdateSeen
from messaging.telegram.send import NO_PREVIEWS, TelegramChannel, markup_of

ALLOWED_UPDATES = ["message", "callback_query"]
Call = dict[str, Any]  # a Bot API call: its "method" and parameters

# To a linked chat, in its owner's language (``_to_owner``); the rest to a stranger.
LINKED = gettext_lazy("Linked. Your nudges will arrive in this chat. Send /stop to pause them.")
ALREADY_LINKED = gettext_lazy("This chat is already linked. Send /stop to pause nudges.")
PAUSED = gettext_lazy("Paused: no more nudges here. Send /start to resume.")
RESUMED = gettext_lazy("Resumed: your nudges will arrive here again.")
BAD_CODE = (
    "That link has expired or was already used. Open Settings on the nudge website "
    "and press “Link Telegram” again."
)
HELLO = "Hello! To link this chat, press “Link Telegram” on the nudge website's settings page."
NOT_LINKED = "This chat is not linked to a nudge account."
HELP = "Send /stop to pause nudges, /start to resume them."


def message_call(chat_id: int | str, text: str, markup: InlineKeyboardMarkup | None = None) -> Call:
    """A ``sendMessage`` call (``TelegramChannel.call``, or a webhook's response):
    with buttons, then without link previews, or plain."""
    call: Call = {"method": "sendMessage", "chat_id": chat_id, "text": text}
    if markup is not None:
        call |= {"reply_markup": markup, "link_preview_options": NO_PREVIEWS}
    return call


def _url_buttons_only(message: Message) -> InlineKeyboardMarkup | None:
    """The message's URL buttons (Join) without the ones already used."""
    rows = message.reply_markup.inline_keyboard if message.reply_markup else ()
    return markup_of([Button(b.text, url=b.url) for b in row if b.url] for row in rows)


def _with_outcome(text: str, outcome: str) -> str:
    """The nudge's text with what happened below it (after a blank line, once)."""
    return f"{text}\n{outcome}" if "\n\n" in text else f"{text}\n\n{outcome}"


def handle_callback(query: CallbackQuery, now: datetime, config: NudgeConfig) -> list[Call]:
    """Act on a button tap, as the chat it came from: the tap's answer, then the edit
    of the tapped message when the tap changed something."""
    message = query.message
    if message is None:
        return [_answer(query, str(chat_words.NOT_HERE))]
    result = chat.tap(Channel.TELEGRAM, str(message.chat.id), query.data or "", now, config)
    if not (result.changed and isinstance(message, Message) and message.text):
        return [_answer(query, result.text)]
    edit = {
        "method": "editMessageText",
        "chat_id": message.chat.id,
        "message_id": message.message_id,
        "text": _with_outcome(message.text, result.text),
        # A capture's new buttons, else the nudge's Join: its used buttons go.
        "reply_markup": markup_of([b] for b in result.buttons) or _url_buttons_only(message),
        "link_preview_options": NO_PREVIEWS,
    }
    return [_answer(query, result.text), edit]


def _answer(query: CallbackQuery, text: str) -> Call:
    return {"method": "answerCallbackQuery", "callback_query_id": query.id, "text": text}


def link_url(code: str) -> str:
    return f"https://t.me/{settings.TELEGRAM_BOT_USERNAME}?start={code}"


def link_qr(url: str) -> str:
    """The link as an SVG ``data:`` URI QR code, drawn here: the link holds a secret."""
    return segno.make_qr(url, error="m").svg_data_uri(scale=5, border=2)


class LinkState:
    WAITING = "waiting"
    LINKED = "linked"
    EXPIRED = "expired"


def link_state(user_id: int, now: datetime) -> str:
    """Where the user's latest Telegram link stands. Inside the user's scope."""
    latest = (
        LinkCode.objects.filter(user_id=user_id, channel=Channel.TELEGRAM)
        .order_by("-created_at", "-pk")
        .first()
    )
    if latest is not None and latest.used_at is not None:
        return LinkState.LINKED
    if latest is not None and latest.expires_at > now:
        return LinkState.WAITING
    return LinkState.EXPIRED


def _to_owner(user_id: int, text) -> str:
    """``text`` in the language of the chat's owner."""
    with in_their_language(user_id):
        return str(text)


def _link(payload: str, chat_id: str, now: datetime) -> str:
    owned = addresses.parse_telegram_payload(payload)
    if owned is None:
        return BAD_CODE
    linked = addresses.link_address(
        owned.user_id,
        Channel.TELEGRAM,
        gettext_noop("sent the one-time link to the bot (/start)"),
        now,
        lambda: chat_id if addresses.use_telegram_code(owned, now) else None,
    )
    if linked:
        return _to_owner(owned.user_id, LINKED)
    if addresses.owner_of(Channel.TELEGRAM, chat_id) == owned.user_id:
        return _to_owner(owned.user_id, ALREADY_LINKED)
    return BAD_CODE


def handle_update(update: Update, now: datetime, config: NudgeConfig) -> list[Call]:
    """Act on one update: the Bot API calls that answer it (none for a replay)."""
    _, first_time = TelegramUpdateSeen.objects.get_or_create(update_id=update.update_id)
    if not first_time:  # a replay
        return []
    if update.callback_query is not None:
        return handle_callback(update.callback_query, now, config)
    message = update.message
    if message is None or not message.text:
        return []
    chat_id = message.chat.id
    address = str(chat_id)
    command, _, rest = message.text.strip().partition(" ")
    command = command.split("@", 1)[0].lower()  # "/start@nudge_bot" in groups
    if command == "/start":
        payload = rest.strip()
        if payload:
            return [message_call(chat_id, _link(payload, address, now))]
        resumed = addresses.stop_or_start(Channel.TELEGRAM, address, "start", now)
        if resumed.user_id is None:
            return [message_call(chat_id, HELLO)]
        said = RESUMED if resumed.changed else ALREADY_LINKED
        return [message_call(chat_id, _to_owner(resumed.user_id, said))]
    if command == "/stop":
        paused = addresses.stop_or_start(Channel.TELEGRAM, address, "stop", now)
        if paused.user_id is None:
            return [message_call(chat_id, NOT_LINKED)]
        return [message_call(chat_id, _to_owner(paused.user_id, PAUSED))]
    answer = chat.answer(Channel.TELEGRAM, address, message.text, now, config)
    if answer is not None:
        return [message_call(chat_id, answer.text, markup_of([b] for b in answer.buttons))]
    if command.startswith("/") and addresses.owner_of(Channel.TELEGRAM, address) is None:
        return [message_call(chat_id, HELP)]
    return []


def parse_update(data: object) -> Update | None:
    """An update from a webhook body, parsed by the library; None when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
        return None
    try:
        return Update.de_json(data, None)
    except (KeyError, TypeError, ValueError):
        return None


def as_json(call: Call) -> dict[str, Any]:
    """``call`` as a webhook's response makes it: Telegram makes the call for us."""
    return {k: v.to_dict() if isinstance(v, TelegramObject) else v for k, v in call.items()}


def set_commands(channel: TelegramChannel) -> int:
    """The command menu (setMyCommands): English by default, then each language."""
    for language in LANGUAGES:
        with override(language):
            commands = [BotCommand(name, str(description)) for name, description in chat_words.MENU]
        code = None if language == "en" else language.split("-", 1)[0]
        channel.call("setMyCommands", commands=commands, language_code=code)
    return len(LANGUAGES)


def resume_offset() -> int | None:
    """Where a (re)started poller continues: after the last update handled."""
    last = TelegramUpdateSeen.objects.aggregate(last=Max("update_id"))["last"]
    return None if last is None else last + 1


def prune_updates_seen(cutoff: datetime) -> int:
    """Forget update ids received before ``cutoff``, except the newest (``resume_offset``);
    Telegram replays an unconfirmed update for at most 24 hours."""
    newest = TelegramUpdateSeen.objects.aggregate(last=Max("update_id"))["last"]
    deleted, _ = (
        TelegramUpdateSeen.objects.filter(received_at__lt=cutoff).exclude(update_id=newest).delete()
    )
    return deleted


def poll_once(
    channel: TelegramChannel,
    offset: int | None,
    timeout: int,
    now: datetime,
    config: NudgeConfig,
) -> int | None:
    """One ``getUpdates`` round: handle each update, answer it; the next offset."""
    updates = channel.call(
        "getUpdates", offset=offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES
    )
    for update in updates:
        for call in handle_update(update, now, config):
            channel.call(**call)
        offset = update.update_id + 1
    return offset
