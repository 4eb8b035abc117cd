"""A fake of the Telegram Bot API, enough for the real ``python-telegram-bot``.

``/bot<token>/getMe`` and ``/bot<token>/sendMessage`` (form or JSON body);
a wrong token answers 401 as Telegram does. For linking: ``getUpdates``
(offset/timeout; 409 Conflict while a webhook is set, as Telegram answers),
``setWebhook`` (with ``secret_token``), ``deleteWebhook`` and
``getWebhookInfo``; :meth:`FakeTelegram.push_message` queues a user's
message as the real update shape (``message`` with ``from``, ``chat``,
``date``, ``text`` and a ``bot_command`` entity). Message ids count up per chat, as
Telegram's do.

For a nudge's buttons: every sent message is kept with its ``reply_markup``
(:meth:`FakeTelegram.markup_of`); :meth:`FakeTelegram.push_tap` queues a
``callback_query`` for a button of a sent message, shaped as Telegram shapes
it (``id``, ``from``, ``message`` with its keyboard, ``chat_instance``,
``data``); ``answerCallbackQuery`` and ``editMessageText`` are recorded
(:meth:`FakeTelegram.calls`) and an edit changes the kept message.

Errors are Telegram's own JSON answers, e.g.
``{"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}``.

    with FakeTelegram() as telegram:
        telegram.plan.on_call(2, FLOOD)
        settings.TELEGRAM_API_BASE_URL = telegram.base_url  # ".../bot", like the real one

For load: ``latency`` holds every ``sendMessage`` answer back that long (a
real round trip; with ``latency_spread`` each answer is held a uniformly drawn
``latency`` … ``latency + latency_spread``, seeded), and ``max_per_second``
makes it behave like Telegram's flood control — more sends than that within any
one second are refused with 429 and ``retry_after``, and not delivered.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import defaultdict, deque
from typing import Any
from urllib.parse import parse_qs

from tests.fakes.base import Answer, Delivered, FakeProviderServer, Fault, RecordedRequest

BOT_TOKEN = "123456789:AAFakeTokenForTestsOnly_0123456789ab"
BOT_ID = 123456789
ENDPOINT = re.compile(r"^/bot(?P<token>[^/]+)/(?P<method>\w+)$")


def telegram_error(
    status: int, description: str, *, name: str, parameters: dict | None = None
) -> Fault:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return Fault(name=name, status=status, body=body)


CHAT_NOT_FOUND = telegram_error(400, "Bad Request: chat not found", name="chat-not-found")
BOT_BLOCKED = telegram_error(403, "Forbidden: bot was blocked by the user", name="bot-blocked")
BOT_KICKED = telegram_error(403, "Forbidden: bot was kicked from the group chat", name="bot-kicked")
FLOOD = telegram_error(
    429,
    "Too Many Requests: retry after 7",
    name="flood",
    parameters={"retry_after": 7},
)
SERVER_ERROR = telegram_error(500, "Internal Server Error", name="server-error")
BAD_GATEWAY = Fault("bad-gateway", 502, "<html><body>502 Bad Gateway</body></html>")
UNAUTHORIZED = telegram_error(401, "Unauthorized", name="unauthorized")


def flood(retry_after: int) -> Fault:
    return telegram_error(
        429,
        f"Too Many Requests: retry after {retry_after}",
        name="flood",
        parameters={"retry_after": retry_after},
    )


def slow(seconds: float, *, delivers: bool = False) -> Fault:
    """An answer held back ``seconds``; with ``delivers`` Telegram still sent the message."""
    return Fault(
        name="slow",
        status=200 if delivers else 504,
        body={"ok": False, "error_code": 504, "description": "Gateway Timeout"},
        delay=seconds,
        delivers=delivers,
    )


def parse_params(headers: dict[str, str], body: bytes) -> dict[str, Any]:
    content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    if not body:
        return {}
    if content_type.startswith("application/json"):
        return json.loads(body)
    return {k: v[-1] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}


def _json_field(value: Any) -> Any:
    """A structured parameter (``reply_markup``): JSON text in a form body, an object in JSON."""
    if isinstance(value, str) and value:
        return json.loads(value)
    return value or None


class FakeTelegram(FakeProviderServer):
    """The Bot API for one bot."""

    def __init__(
        self,
        token: str = BOT_TOKEN,
        *,
        latency: float = 0.0,
        max_per_second: int | None = None,
        retry_after: int = 1,
        latency_spread: float = 0.0,
    ) -> None:
        super().__init__()
        self.token = token
        self.latency = latency
        self.latency_spread = latency_spread
        self._spread = random.Random(35)
        self.max_per_second = max_per_second
        self.retry_after = retry_after
        self._accepted_at: deque[float] = deque()  # sends accepted within the last second
        self._last_message_id: dict[str, int] = defaultdict(int)
        self.reset_state()

    @property
    def base_url(self) -> str:
        """What ``Bot(base_url=…)`` and TELEGRAM_API_BASE_URL expect: the token follows it."""
        return f"{self.url}/bot"

    def reset_state(self) -> None:
        self._last_message_id.clear()
        self._accepted_at.clear()
        self.updates: list[dict[str, Any]] = []
        self.next_update_id = 100_000_001
        # (chat id, message id) -> the message as sent or last edited.
        self.messages: dict[tuple[str, int], dict[str, Any]] = {}
        self.webhook: dict[str, Any] = {}
        # setMyCommands: language code ("" the default) -> the commands.
        self.command_menus: dict[str, Any] = {}

    def _over_the_limit(self, at: float) -> bool:
        """Flood control: whether this send would be one too many within a second."""
        if self.max_per_second is None:
            return False
        with self.lock:
            while self._accepted_at and self._accepted_at[0] <= at - 1.0:
                self._accepted_at.popleft()
            if len(self._accepted_at) >= self.max_per_second:
                return True
            self._accepted_at.append(at)
            return False

    def flood_count(self) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.outcome == "flood")

    def busiest_second(self) -> int:
        """The most messages delivered within any one-second window."""
        with self.lock:
            times = sorted(d.at for d in self.delivered)
        busiest, start = 0, 0
        for end, at in enumerate(times):
            while times[start] <= at - 1.0:
                start += 1
            busiest = max(busiest, end - start + 1)
        return busiest

    def push_message(self, chat_id: int, text: str, *, first_name: str = "Ana") -> dict[str, Any]:
        """Queue a private-chat message from user ``chat_id`` as Telegram shapes it."""
        with self.lock:
            update_id = self.next_update_id
            self.next_update_id += 1
        message: dict[str, Any] = {
            "message_id": update_id % 100_000,
            "from": {
                "id": chat_id,
                "is_bot": False,
                "first_name": first_name,
                "language_code": "en",
            },
            "chat": {"id": chat_id, "first_name": first_name, "type": "private"},
            "date": int(time.time()),
            "text": text,
        }
        if text.startswith("/"):
            command = text.split(" ", 1)[0]
            message["entities"] = [{"offset": 0, "length": len(command), "type": "bot_command"}]
        update = {"update_id": update_id, "message": message}
        with self.lock:
            self.updates.append(update)
        return update

    def markup_of(self, chat_id: int | str, message_id: int) -> dict[str, Any] | None:
        """The keyboard a kept message carries (None: no buttons)."""
        with self.lock:
            return self.messages[(str(chat_id), message_id)].get("reply_markup")

    def text_of(self, chat_id: int | str, message_id: int) -> str:
        with self.lock:
            return self.messages[(str(chat_id), message_id)]["text"]

    def push_tap(
        self,
        chat_id: int | str,
        message_id: int,
        callback_data: str,
        *,
        from_id: int | None = None,
        in_chat: int | str | None = None,
    ) -> dict[str, Any]:
        """Queue a tap on a button carrying ``callback_data`` under a sent message.

        ``in_chat`` makes the message appear in another chat (a forwarded copy, a
        forged update) while keeping the keyboard: the button's token is what the
        bot must check.
        """
        with self.lock:
            kept = dict(self.messages[(str(chat_id), message_id)])
            update_id = self.next_update_id
            self.next_update_id += 1
        chat = self._chat(str(in_chat if in_chat is not None else chat_id))
        user_id = from_id if from_id is not None else chat["id"]
        message = {
            "message_id": message_id,
            "from": self.me(),
            "chat": chat,
            "date": kept["date"],
            "text": kept["text"],
        }
        if kept.get("reply_markup"):
            message["reply_markup"] = kept["reply_markup"]
        update = {
            "update_id": update_id,
            "callback_query": {
                "id": str(4_000_000_000_000_000 + update_id),
                "from": {"id": user_id, "is_bot": False, "first_name": "Ana"},
                "message": message,
                "chat_instance": str(-abs(hash(str(chat["id"])))),
                "data": callback_data,
            },
        }
        with self.lock:
            self.updates.append(update)
        return update

    def _answer_callback(self, params: dict[str, Any]) -> Answer:
        if not params.get("callback_query_id"):
            return Answer.from_fault(
                telegram_error(400, "Bad Request: query is too old", name="old-query")
            )
        return Answer.json(200, {"ok": True, "result": True})

    def _edit_message_text(self, params: dict[str, Any]) -> Answer:
        key = (str(params.get("chat_id", "")), int(params.get("message_id") or 0))
        with self.lock:
            kept = self.messages.get(key)
            if kept is None:
                return Answer.from_fault(
                    telegram_error(
                        400, "Bad Request: message to edit not found", name="edit-not-found"
                    )
                )
            markup = _json_field(params.get("reply_markup"))
            if kept["text"] == params.get("text") and kept.get("reply_markup") == markup:
                return Answer.from_fault(
                    telegram_error(
                        400,
                        "Bad Request: message is not modified: specified new message content "
                        "and reply markup are exactly the same",
                        name="not-modified",
                    )
                )
            kept.update(text=str(params.get("text", "")), reply_markup=markup)
            result = {
                "message_id": key[1],
                "date": kept["date"],
                "edit_date": int(time.time()),
                "chat": self._chat(key[0]),
                "from": self.me(),
                "text": kept["text"],
            }
            if markup:
                result["reply_markup"] = markup
        return Answer.json(200, {"ok": True, "result": result})

    def _get_updates(self, params: dict[str, Any]) -> Answer:
        if self.webhook.get("url"):
            return Answer.json(
                409,
                {
                    "ok": False,
                    "error_code": 409,
                    "description": "Conflict: can't use getUpdates method while webhook is "
                    "active; use deleteWebhook to delete the webhook first",
                },
            )
        offset = int(params.get("offset") or 0)
        with self.lock:
            # Asking with an offset confirms every earlier update, as Telegram does.
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
            pending = list(self.updates)
        return Answer.json(200, {"ok": True, "result": pending})

    def _webhook_method(self, api_method: str, params: dict[str, Any]) -> Answer:
        if api_method == "setWebhook":
            with self.lock:
                self.webhook = {
                    "url": str(params.get("url", "")),
                    "secret_token": str(params.get("secret_token", "")),
                    "allowed_updates": params.get("allowed_updates"),
                }
            return Answer.json(200, {"ok": True, "result": True, "description": "Webhook was set"})
        if api_method == "deleteWebhook":
            with self.lock:
                self.webhook = {}
            return Answer.json(
                200, {"ok": True, "result": True, "description": "Webhook was deleted"}
            )
        with self.lock:
            info = {
                "url": self.webhook.get("url", ""),
                "has_custom_certificate": False,
                "pending_update_count": len(self.updates),
            }
        return Answer.json(200, {"ok": True, "result": info})

    def calls(self, method: str) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path.endswith(f"/{method}")]

    def _chat(self, chat_id: str) -> dict[str, Any]:
        if chat_id.lstrip("-").isdigit():
            number = int(chat_id)
            kind = "private" if number > 0 else "supergroup"
            return {"id": number, "type": kind, "first_name": "Test"} | (
                {"title": "Test group"} if number < 0 else {}
            )
        return {"id": -1001000000000, "type": "channel", "title": "Test", "username": chat_id[1:]}

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        try:
            params = parse_params(headers, body)
        except (ValueError, UnicodeDecodeError):
            params = {}
        request = RecordedRequest(method, path, headers, params, body, time.time())
        match = ENDPOINT.match(path.split("?", 1)[0])
        if not match:
            self.record(request)
            return Answer.json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        if match["token"] != self.token:
            self.record(request)
            return Answer.from_fault(UNAUTHORIZED)

        api_method = match["method"]
        if api_method == "getMe":
            self.record(request)
            return Answer.json(200, {"ok": True, "result": self.me()})
        if api_method == "getUpdates":
            self.record(request)
            return self._get_updates(params)
        if api_method in ("setWebhook", "deleteWebhook", "getWebhookInfo"):
            self.record(request)
            return self._webhook_method(api_method, params)
        if api_method == "setMyCommands":
            self.record(request)
            with self.lock:
                code = str(params.get("language_code") or "")
                self.command_menus[code] = _json_field(params.get("commands"))
            return Answer.json(200, {"ok": True, "result": True})
        if api_method == "answerCallbackQuery":
            self.record(request)
            return self._answer_callback(params)
        if api_method == "editMessageText":
            self.record(request)
            return self._edit_message_text(params)
        if api_method != "sendMessage":
            self.record(request)
            return Answer.json(404, {"ok": False, "error_code": 404, "description": "Not Found"})

        chat_id = str(params.get("chat_id", ""))
        text = str(params.get("text", ""))
        if not text:
            request.outcome = "empty-text"
            self.record(request)
            return Answer.from_fault(
                telegram_error(400, "Bad Request: message text is empty", name="empty-text")
            )
        _, fault = self.next_send(chat_id)
        if fault is None and self._over_the_limit(time.time()):
            fault = flood(self.retry_after)
        if fault is not None and not fault.delivers:
            if (self.latency or self.latency_spread) and not fault.delay:
                fault = Fault(fault.name, fault.status, fault.body, fault.headers, self._delay())
            request.outcome = fault.name
            self.record(request)
            return Answer.from_fault(fault)

        chat = self._chat(chat_id)
        markup = _json_field(params.get("reply_markup"))
        with self.lock:
            self._last_message_id[chat_id] += 1
            message_id = self._last_message_id[chat_id]
            self.messages[(chat_id, message_id)] = {
                "text": text,
                "date": int(time.time()),
                "reply_markup": markup,
            }
        self.deliver(Delivered(chat_id, text, f"{chat['id']}:{message_id}", params, time.time()))
        request.outcome = "delivered"
        self.record(request)
        result = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": self.me(),
            "text": text,
        }
        if markup:
            result["reply_markup"] = markup
        answer = Answer.json(200, {"ok": True, "result": result})
        delay = fault.delay if fault is not None else self._delay()
        return Answer(answer.status, answer.body, answer.headers, delay)

    def _delay(self) -> float:
        """How long this answer is held: ``latency``, plus a draw within the spread."""
        if not self.latency_spread:
            return self.latency
        with self.lock:
            return self.latency + self._spread.uniform(0.0, self.latency_spread)

    def me(self) -> dict[str, Any]:
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Nudge",
            "username": "nudge_test_bot",
            "can_join_groups": False,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
