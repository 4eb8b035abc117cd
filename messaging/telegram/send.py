"""Telegram through python-telegram-bot: one event loop on its own thread per instance, so
a run's workers share one bot, pool and ``getMe``. Plain text, no link previews. The token
is in every Bot API URL: nothing raised here or let through the library's loggers holds it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, TypeVar

import httpx
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest

from core.config import NudgeConfig
from core.executor import spawn
from messaging.action_tokens import DONE, SNOOZE, sign
from messaging.channels.base import (
    NudgeMessage,
    PermanentSendError,
    RateLimited,
    Sender,
    SendError,
    SendReceipt,
    TransientSendError,
    UnconfirmedSendError,
    misconfigured,
    unreadable_acceptance,
)
from messaging.chat_words import Button

DEFAULT_BASE_URL = "https://api.telegram.org/bot"
REDACTED = "<bot-token>"
MAX_LONG_POLL_SECONDS = 50  # getUpdates' own limit
# The loggers that write Bot API URLs, by exact name: a logger's filters see
# only the records logged on it.
TOKEN_BEARING_LOGGERS = ("telegram.Bot", "httpx")
NO_PREVIEWS = LinkPreviewOptions(is_disabled=True)
T = TypeVar("T")


@functools.cache  # once per token
def install_token_filter(token: str) -> None:
    """Replace ``token`` in each record of the token-bearing loggers before any handler
    sees it."""

    def redact(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if token in message:
            record.msg = message.replace(token, REDACTED)
            record.args = None
        return True

    for name in TOKEN_BEARING_LOGGERS:
        logging.getLogger(name).addFilter(redact)


def new_bot(token: str, pool_size: int) -> Bot:
    """A Bot on ``TELEGRAM_API_BASE_URL`` (with or without its ``/bot``), each request
    bounded by ``CHANNEL_TIMEOUT_SECONDS`` (a long poll's reads by the longest poll more)."""
    base = (settings.TELEGRAM_API_BASE_URL or DEFAULT_BASE_URL).rstrip("/")
    timeout = settings.CHANNEL_TIMEOUT_SECONDS

    def request(size: int, read_timeout: float) -> HTTPXRequest:
        return HTTPXRequest(
            connection_pool_size=size,
            connect_timeout=timeout,
            read_timeout=read_timeout,
            write_timeout=timeout,
            pool_timeout=timeout,
        )

    return Bot(
        token,
        base_url=base if base.endswith("/bot") else f"{base}/bot",
        request=request(pool_size, timeout),
        get_updates_request=request(1, timeout + MAX_LONG_POLL_SECONDS),
    )


def classify_telegram_error(exc: TelegramError) -> SendError:
    """The channel error a library exception stands for (its text may quote the token).
    After the request left, a timeout or drop is unconfirmed (no idempotency key)."""
    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # v22: "will become a timedelta"
            value = exc.retry_after
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
        return RateLimited(
            f"Telegram flood control: retry in {seconds:g} s", code="429", retry_after=seconds
        )
    if isinstance(exc, InvalidToken):
        # The library's own message quotes the token.
        return misconfigured("Telegram rejected the bot token: check TELEGRAM_BOT_TOKEN", "401")
    if isinstance(exc, ChatMigrated):
        return PermanentSendError(
            f"Telegram group became a supergroup; its chat id is now {exc.new_chat_id}",
            code="chat_migrated",
        )
    if isinstance(exc, Forbidden):
        return PermanentSendError(f"Telegram refused: {exc.message}", code="403")
    if isinstance(exc, BadRequest):  # a NetworkError subclass: must come before it
        return PermanentSendError(f"Telegram bad request: {exc.message}", code="400")
    if isinstance(exc, TimedOut):
        # The library chains the httpx timeout; only a connect or pool timeout
        # proves the request never left.
        if isinstance(exc.__cause__, httpx.ConnectTimeout | httpx.PoolTimeout):
            return TransientSendError("could not reach Telegram in time", code="timeout")
        return UnconfirmedSendError("Telegram did not answer in time", code="timeout")
    if isinstance(exc, NetworkError):
        if isinstance(exc.__cause__, httpx.RemoteProtocolError | httpx.ReadError):
            # The request went out and the connection dropped before the answer.
            return UnconfirmedSendError("Telegram hung up without answering", code="network")
        return TransientSendError(f"Telegram unreachable: {exc.message}", code="network")
    if type(exc) is TelegramError:
        # Raised bare only when a 2xx body is not the JSON the Bot API sends;
        # error answers come back as the subclasses above.
        return unreadable_acceptance("Telegram", exc.message)
    return TransientSendError(
        f"Telegram error {type(exc).__name__}: {exc.message}", code="telegram"
    )


def markup_of(rows: Iterable[Sequence[Button]]) -> InlineKeyboardMarkup | None:
    """Telegram's buttons, by rows: a link opens, the others send their token. None: none."""
    keyboard = [
        [
            InlineKeyboardButton(b.label, url=b.url)
            if b.url
            else InlineKeyboardButton(b.label, callback_data=b.token)
            for b in row
        ]
        for row in rows
        if row
    ]
    return InlineKeyboardMarkup(keyboard) if keyboard else None


def keyboard(address: str, message: NudgeMessage) -> InlineKeyboardMarkup | None:
    """Join (a URL), Snooze (not on a nudge sent at or after the start: a snooze then is
    refused) and, for a follow-up, Done, in one row and the nudge's language; the last
    two carry tokens signed for this row and chat; then the agenda's Join links, one a
    row. None: no buttons."""
    buttons = []
    actions = message.actions
    with translation.override(message.language):
        if message.join_url:
            buttons.append(Button(gettext("Join"), url=message.join_url))
        if actions is not None and message.minutes_until >= 1:
            label = gettext("Snooze %(minutes)s min") % {"minutes": actions.snooze_minutes}
            buttons.append(Button(label, sign(SNOOZE, actions.send_id, address)))
        if actions is not None and actions.can_mark_done:
            buttons.append(Button(gettext("Done"), sign(DONE, actions.send_id, address)))
    return markup_of([buttons, *([Button(label, url=url)] for label, url in message.links)])


class TelegramChannel(Sender):
    def __init__(self) -> None:
        self._token: str = settings.TELEGRAM_BOT_TOKEN
        self.timeout: float = settings.CHANNEL_TIMEOUT_SECONDS
        self.pool_size: int = NudgeConfig.from_settings().send_concurrency
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._bot: Bot | None = None
        self._initialized: asyncio.Future[None] | None = None
        if self._token:
            install_token_filter(self._token)

    def _started(self) -> tuple[Bot, asyncio.AbstractEventLoop]:
        """The channel's bot and the loop it runs on, made on first use."""
        with self._lock:
            if self._bot is None:
                if not self._token:
                    raise misconfigured("Telegram is not configured: TELEGRAM_BOT_TOKEN empty")
                try:
                    bot = new_bot(self._token, self.pool_size)
                except InvalidToken:
                    # Raised for a token with whitespace; the message may quote it.
                    raise misconfigured("TELEGRAM_BOT_TOKEN is malformed") from None
                self._loop = asyncio.new_event_loop()
                self._loop_thread = spawn("telegram-channel", self._loop.run_forever)
                self._bot = bot  # last: a bot means its loop and thread run
            return self._bot, self._loop

    async def _initialize_once(self, bot: Bot) -> None:
        """``getMe`` once for all concurrent sends; a failure lets the next send try
        again, except a rejected token (it will not start working within this run)."""
        previous = self._initialized
        failed = previous is not None and previous.done() and previous.exception() is not None
        if previous is None or (failed and not isinstance(previous.exception(), InvalidToken)):
            self._initialized = asyncio.ensure_future(bot.initialize())
        await asyncio.shield(self._initialized)

    def call(self, method: str, **params: Any) -> Any:
        """Make the Bot API call ``method`` (``sendMessage``…) on the channel's loop from
        any thread, blocking that thread; a failure raised as the channel error it stands for."""
        bot, loop = self._started()
        return self._result(asyncio.run_coroutine_threadsafe(getattr(bot, method)(**params), loop))

    def _result(self, future: Future[T], timeout: float | None = None) -> T:
        try:
            return future.result(timeout)
        except TelegramError as exc:
            # from None: the library's exception (and its cause) may quote the token.
            raise classify_telegram_error(exc).redacted(self._token) from None

    def _ready(self, timeout: float | None = None) -> None:
        """``getMe`` done (no hop to the loop's thread once it is)."""
        ready = self._initialized
        if ready is None or not ready.done() or ready.exception() is not None:
            bot, loop = self._started()
            self._result(
                asyncio.run_coroutine_threadsafe(self._initialize_once(bot), loop), timeout
            )

    def warm_up(self) -> None:
        """``getMe`` before the first slot, not inside it."""
        try:
            self._ready(self.timeout)
        except Exception:  # noqa: S110 — send() reports the same failure, classified
            pass

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        """Send from any thread; blocks that thread until Telegram answers."""
        # Built (and signed) on the calling worker thread, not on the shared loop.
        markup = keyboard(address, message)
        try:
            self._ready()
            sent = self.call(
                "sendMessage",
                chat_id=address,
                text=message.text,
                link_preview_options=NO_PREVIEWS,
                reply_markup=markup,
            )
            chat_id, message_id = sent.chat.id, sent.message_id
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # The library turning a 2xx answer into a Message failed.
            raise unreadable_acceptance("Telegram", type(exc).__name__) from None
        if not isinstance(chat_id, int) or not isinstance(message_id, int):
            raise unreadable_acceptance(
                "Telegram", f"message id {message_id!r} in chat {chat_id!r}"
            )
        # message_id is unique only within its chat.
        return SendReceipt(provider_message_id=f"{chat_id}:{message_id}")

    def close(self) -> None:
        with self._lock:
            loop, thread, bot = self._loop, self._loop_thread, self._bot
            self._loop = self._loop_thread = self._bot = None
            self._initialized = None
        if bot is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(bot.shutdown(), loop).result(self.timeout)
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(self.timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=self.timeout)
            loop.close()
