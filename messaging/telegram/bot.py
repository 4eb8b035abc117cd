"""The bot: linking (``/start <code>``, ``/stop``), the chat and buttons. Webhook updates
(answered in the response) and polled ones meet in :func:`handle_update`, once per update
id. A tap is always answered (else the button spins); one that changed something edits
the message to say so, keeping only its Join button.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import segno
from django.conf import settings
from django.db.models import Max
from django.utils.translation import override
from telegram import (
    BotCommand,
    CallbackQuery,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    Update,
)

from accounts.actions import PAUSED_BY_TELEGRAM_STOP
from accounts.models import Channel
from core.config import NudgeConfig
from messaging import action_tokens, addresses, chat, chat_words, nudge_actions
from messaging.chat_words import Button
from messaging.messages import LANGUAGES
from messaging.models import LinkCode, TelegramUpdateSeen
from messaging.telegram.send import TelegramChannel, markup_of

ALLOWED_UPDATES = ["message", "callback_query"]

LINKED = "Linked. Your nudges will arrive in this chat. Send /stop to pause them."
ALREADY_LINKED = "This chat is already linked. Send /stop to pause nudges."
BAD_CODE = (
    "That link has expired or was already used. Open Settings on the nudge website "
    "and press “Link Telegram” again."
)
HELLO = "Hello! To link this chat, press “Link Telegram” on the nudge website's settings page."
PAUSED = "Paused: no more nudges here. Send /start to resume."
RESUMED = "Resumed: your nudges will arrive here again."
NOT_LINKED = "This chat is not linked to a nudge account."
HELP = "Send /stop to pause nudges, /start to resume them."


@dataclass(frozen=True)
class Reply:
    chat_id: int
    text: str
    markup: InlineKeyboardMarkup | None = None

    def as_webhook_answer(self) -> dict[str, Any]:
        """The Bot API call Telegram makes for us as the webhook's response."""
        answer = {"method": "sendMessage", "chat_id": self.chat_id, "text": self.text}
        if self.markup is not None:
            answer["reply_markup"] = self.markup.to_dict()
            answer["link_preview_options"] = {"is_disabled": True}
        return answer


@dataclass(frozen=True)
class CallbackAnswer:
    """What a button tap gets back: the toast, and the message's new text if it changed."""

    callback_query_id: str
    text: str
    chat_id: int | None = None
    message_id: int | None = None
    new_text: str | None = None  # None: leave the message as it is
    keep_markup: InlineKeyboardMarkup | None = None  # the URL buttons (Join) kept

    def as_webhook_answer(self) -> dict[str, Any]:
        return {
            "method": "answerCallbackQuery",
            "callback_query_id": self.callback_query_id,
            "text": self.text,
        }


def _url_buttons_only(message: Message) -> InlineKeyboardMarkup | None:
    """The message's URL buttons (Join) without the ones already used."""
    rows = message.reply_markup.inline_keyboard if message.reply_markup else ()
    return markup_of([Button(b.text, url=b.url) for b in row if b.url] for row in rows)


def _with_outcome(text: str, outcome: str) -> str:
    """The nudge's text with what happened below it (after a blank line, once)."""
    return f"{text}\n{outcome}" if "\n\n" in text else f"{text}\n\n{outcome}"


def handle_callback(query: CallbackQuery, now: datetime, config: NudgeConfig) -> CallbackAnswer:
    """Act on a button tap, as the chat it came from."""
    message = query.message
    chat_id = message.chat.id if message is not None else None
    if chat_id is None:
        return CallbackAnswer(query.id, str(chat_words.NOT_HERE))
    claim = action_tokens.verify(query.data or "", str(chat_id))
    # A capture's Undo / Change time or an ask-back's choice, else a nudge's Snooze / Done.
    by_chat = claim is not None and claim.act not in (action_tokens.SNOOZE, action_tokens.DONE)
    tap = chat.tap if by_chat else nudge_actions.tap
    result = tap(Channel.TELEGRAM, str(chat_id), claim, now, config)
    if result.changed and isinstance(message, Message) and message.text:
        return CallbackAnswer(
            query.id,
            result.text,
            chat_id=chat_id,
            message_id=message.message_id,
            new_text=_with_outcome(message.text, result.text),
            keep_markup=markup_of([b] for b in result.buttons)
            if by_chat
            else _url_buttons_only(message),
        )
    return CallbackAnswer(query.id, result.text)


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


def _link(payload: str, chat_id: str, now: datetime) -> str:
    owned = addresses.parse_telegram_payload(payload)
    if owned is None:
        return BAD_CODE
    linked = addresses.link_address(
        owned.user_id,
        Channel.TELEGRAM,
        "sent the one-time link to the bot (/start)",
        now,
        lambda: chat_id if addresses.use_telegram_code(owned, now) else None,
    )
    if linked:
        return LINKED
    if addresses.owner_of(Channel.TELEGRAM, chat_id) == owned.user_id:
        return ALREADY_LINKED
    return BAD_CODE


def handle_update(
    update: Update, now: datetime, config: NudgeConfig
) -> Reply | CallbackAnswer | None:
    """Act on one update; the answer to send, if any."""
    _, first_time = TelegramUpdateSeen.objects.get_or_create(update_id=update.update_id)
    if not first_time:  # a replay
        return None
    if update.callback_query is not None:
        return handle_callback(update.callback_query, now, config)
    message = update.message
    if message is None or not message.text:
        return None
    chat_id = message.chat.id
    address = str(chat_id)
    command, _, rest = message.text.strip().partition(" ")
    command = command.split("@", 1)[0].lower()  # "/start@nudge_bot" in groups
    if command == "/start":
        payload = rest.strip()
        if payload:
            return Reply(chat_id, _link(payload, address, now))
        resumed = addresses.resume_from(Channel.TELEGRAM, address, "sent /start in Telegram", now)
        if resumed.changed:
            return Reply(chat_id, RESUMED)
        return Reply(chat_id, ALREADY_LINKED if resumed.user_id else HELLO)
    if command == "/stop":
        paused = addresses.pause_from(Channel.TELEGRAM, address, PAUSED_BY_TELEGRAM_STOP, now)
        return Reply(chat_id, PAUSED if paused.user_id else NOT_LINKED)
    answer = chat.answer(Channel.TELEGRAM, address, message.text, now, config)
    if answer is not None:
        return Reply(chat_id, answer.text, markup_of([b] for b in answer.buttons))
    if command.startswith("/") and addresses.owner_of(Channel.TELEGRAM, address) is None:
        return Reply(chat_id, HELP)
    return None


def parse_update(data: object) -> Update | None:
    """An update from a webhook body, parsed by the library; None when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
        return None
    try:
        return Update.de_json(data, None)
    except (KeyError, TypeError, ValueError):
        return None


def send_reply(channel: TelegramChannel, reply: Reply | CallbackAnswer) -> None:
    """Send what the webhook would answer with: a message, or a tap's answer and the
    tapped message's edit."""
    if isinstance(reply, Reply):
        channel.run(
            channel.bot.send_message(
                chat_id=reply.chat_id,
                text=reply.text,
                reply_markup=reply.markup,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        )
        return
    channel.run(channel.bot.answer_callback_query(reply.callback_query_id, text=reply.text))
    edit(channel, reply)


def edit(channel: TelegramChannel, answer: CallbackAnswer) -> None:
    """Edit the tapped message to say what happened (nothing to do when unchanged)."""
    if answer.new_text is None:
        return
    channel.run(
        channel.bot.edit_message_text(
            answer.new_text,
            chat_id=answer.chat_id,
            message_id=answer.message_id,
            reply_markup=answer.keep_markup,
            link_preview_options=LinkPreviewOptions(is_disabled=True),
        )
    )


def set_commands(channel: TelegramChannel) -> int:
    """The command menu (setMyCommands): English by default, then each language."""
    for language in LANGUAGES:
        with override(language):
            commands = [BotCommand(name, str(description)) for name, description in chat_words.MENU]
        code = None if language == "en" else language.split("-", 1)[0]
        channel.run(channel.bot.set_my_commands(commands, language_code=code))
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
    updates = channel.bot.get_updates(
        offset=offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES
    )
    for update in channel.run(updates):
        reply = handle_update(update, now, config)
        if reply is not None:
            send_reply(channel, reply)
        offset = update.update_id + 1
    return offset
