"""No Twilio auth token, Telegram bot token or calendar OAuth secret ever reaches a log
line, an exception, a queue row's ``last_error`` or the sweep run log.

Distinctive secret values are configured, every kind of failing send is driven
through the real channels against the fake providers (including a wrong token
and an unreachable server), a calendar provider that *echoes* the credentials
it was sent in its error bodies is synced, and failing runs are recorded —
with every logger at DEBUG and SQL logging on. Then all of it is searched,
in plain, URL-encoded and base64 forms.
"""

from __future__ import annotations

import base64
import logging
import socket
from datetime import timedelta
from urllib.parse import quote

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.utils import timezone

from calendars.models import CalendarConnection, Provider
from core.log_format import KeyValueFormatter
from providers import crypto
from scheduled_sends.models import ScheduledSend, SweepRun
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tenancy.scope import support_scope, tenant_scope
from tests.channels.queue import queue_follow_up
from tests.fakes import telegram_server as tg
from tests.fakes import twilio_server as tw
from tests.fakes.base import Answer, FakeProviderServer, Fault, RecordedRequest
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.twilio_server import FakeTwilio
from tests.support.processes import manage, subprocess_env

ACCOUNT_SID = "AC" + "5ec7e75ec7e75ec7e75ec7e75ec7e75e"
TWILIO_TOKEN = "tw1l10-CANARY-auth-token-7a1f93d2"
WRONG_TWILIO_TOKEN = "tw1l10-CANARY-wrong-token-0b2e77c4"
BOT_TOKEN = "918273645:AAcanary-BOT-token-ZZq7x9LmP4"
WRONG_BOT_TOKEN = "918273645:AAcanary-WRONG-bot-token-Kk3"
ACCESS_TOKEN = "ya29.CANARY-oauth-access-token-5d4c"
REFRESH_TOKEN = "1//CANARY-oauth-refresh-token-9e8f"
CLIENT_SECRET = "GOCSPX-CANARY-client-secret-1a2b"
SECRETS = (
    TWILIO_TOKEN,
    WRONG_TWILIO_TOKEN,
    BOT_TOKEN,
    WRONG_BOT_TOKEN,
    ACCESS_TOKEN,
    REFRESH_TOKEN,
    CLIENT_SECRET,
)
LOGGERS = ("", "nudge", "httpx", "httpcore", "telegram", "twilio", "urllib3", "requests")


def forms(secret: str) -> set[str]:
    """The ways a secret can appear in text: as is, URL-encoded, inside basic auth."""
    found = {secret, quote(secret, safe=""), quote(secret)}
    for user in (ACCOUNT_SID, ""):
        found.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    # The distinctive tail alone, in case something truncates or re-encodes the rest.
    found.add(secret[-12:])
    return found


def leaks(text: str) -> list[str]:
    return sorted({form for secret in SECRETS for form in forms(secret) if form in text})


class EchoingCalendar(FakeProviderServer):
    """A calendar provider that quotes back what it was sent, credentials included."""

    def answer(self, method, path, headers, body):
        self.record(RecordedRequest(method, path, headers, {}, body, 0.0))
        echo = f"{method} {path} headers={headers} body={body.decode(errors='replace')}"
        if "token" in path:
            return Answer.json(400, {"error": "invalid_grant", "error_description": echo})
        return Answer.json(401, {"error": {"code": 401, "message": echo, "errors": []}})


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def capture_everything(caplog):
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    connection.force_debug_cursor = True  # SQL and its parameters, as DEBUG=True logs them
    caplog.set_level(logging.DEBUG, logger="django.db.backends")
    yield caplog
    connection.force_debug_cursor = False


def everything_logged(caplog) -> str:
    formatter = KeyValueFormatter()
    lines = []
    for record in caplog.records:
        lines.append(formatter.format(record))
        lines.append(repr(record.__dict__))
    return "\n".join(lines)


def stored_text() -> str:
    with support_scope():
        rows = list(
            ScheduledSend.objects.values_list("last_error", "provider_message_id", "channel")
        )
        connections = list(CalendarConnection.objects.values_list("last_error", "sync_state"))
    runs = list(SweepRun.objects.values_list("error", "summary", "counts"))
    return repr((rows, connections, runs))


@pytest.fixture
def providers(settings):
    with (
        FakeTwilio(ACCOUNT_SID, TWILIO_TOKEN) as twilio,
        FakeTelegram(BOT_TOKEN) as telegram,
        EchoingCalendar() as calendar,
    ):
        settings.TWILIO_ACCOUNT_SID = ACCOUNT_SID
        settings.TWILIO_AUTH_TOKEN = TWILIO_TOKEN
        settings.TWILIO_WHATSAPP_FROM = "+14155238886"
        settings.TWILIO_API_BASE_URL = twilio.url
        settings.TWILIO_CONTENT_SID = ""
        settings.TWILIO_STATUS_CALLBACK_URL = ""
        settings.TELEGRAM_BOT_TOKEN = BOT_TOKEN
        settings.TELEGRAM_API_BASE_URL = telegram.base_url
        settings.CHANNEL_TIMEOUT_SECONDS = 0.5
        settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
        settings.CALENDAR_HTTP_TIMEOUT_SECONDS = 2.0
        settings.GOOGLE_CLIENT_ID = "canary-client.apps.example"
        settings.GOOGLE_CLIENT_SECRET = CLIENT_SECRET
        settings.GOOGLE_TOKEN_URL = f"{calendar.url}/token"
        settings.GOOGLE_API_BASE_URL = f"{calendar.url}/calendar/v3"
        yield twilio, telegram, calendar


TWILIO_FAULTS = [
    tw.SERVER_ERROR,
    tw.BAD_GATEWAY,
    # The 429 paths, with the shortest Retry-After: a run waits the pause out.
    tw.twilio_error(20429, "Too Many Requests", 429, retry_after="1"),
    tw.INVALID_TO,
    tw.slow(1.5),
    tw.twilio_error(20003, f"Authenticate {TWILIO_TOKEN}", 401, name="echo"),
]
TELEGRAM_FAULTS = [
    tg.SERVER_ERROR,
    tg.BAD_GATEWAY,
    tg.flood(1),
    tg.CHAT_NOT_FOUND,
    tg.BOT_BLOCKED,
    tg.slow(1.5),
    Fault(
        "echo",
        400,
        {"ok": False, "error_code": 400, "description": f"Bad Request: /bot{BOT_TOKEN}/x"},
    ),
]


def queue_failing_sends(make_user, twilio, telegram, now, batch: int = 0) -> None:
    for i, fault in enumerate(TWILIO_FAULTS):
        number = f"+1415555{2000 + 100 * batch + i:04d}"
        queue_follow_up(make_user(channel="whatsapp", whatsapp_number=number), "T", now=now)
        twilio.plan.for_recipient(f"whatsapp:{number}", fault)
    for i, fault in enumerate(TELEGRAM_FAULTS):
        chat = str(880000 + 100 * batch + i)
        queue_follow_up(make_user(channel="telegram", telegram_chat_id=chat), "T", now=now)
        telegram.plan.for_recipient(chat, fault)


@pytest.mark.django_db
def test_failing_sends_and_runs_leak_no_secret(
    make_user, providers, capture_everything, settings, capsys
):
    twilio, telegram, calendar = providers
    now = timezone.now().replace(microsecond=0)
    queue_failing_sends(make_user, twilio, telegram, now)

    # A calendar that echoes the credentials it receives.
    owner = make_user("calendar-owner")
    with tenant_scope(owner.pk):
        CalendarConnection.objects.create(
            user=owner,
            provider=Provider.GOOGLE,
            access_token_encrypted=crypto.encrypt(ACCESS_TOKEN),
            refresh_token_encrypted=crypto.encrypt(REFRESH_TOKEN),
            token_expires_at=now + timedelta(hours=1),
        )
    run_materialize(now)

    first = run_deliver(now)
    assert first.sent == 0 and first.claimed == len(TWILIO_FAULTS) + len(TELEGRAM_FAULTS)

    # Wrong credentials, then unreachable providers: the libraries' own error paths.
    twilio.plan.clear()
    telegram.plan.clear()
    later = now + timedelta(minutes=20)
    queue_failing_sends(make_user, twilio, telegram, later, batch=1)
    settings.TWILIO_AUTH_TOKEN = WRONG_TWILIO_TOKEN
    settings.TELEGRAM_BOT_TOKEN = WRONG_BOT_TOKEN
    twilio.plan.clear()
    telegram.plan.clear()
    assert run_deliver(later).failed >= 2
    later += timedelta(minutes=20)
    queue_failing_sends(make_user, twilio, telegram, later, batch=2)
    twilio.plan.clear()
    telegram.plan.clear()
    settings.TWILIO_API_BASE_URL = closed_port_url()
    settings.TELEGRAM_API_BASE_URL = closed_port_url() + "/bot"
    assert run_deliver(later).retried >= 2

    # A run that fails outright (its channel class cannot even be imported).
    settings.NUDGE_CHANNEL_BACKENDS = {
        **settings.NUDGE_CHANNEL_BACKENDS,
        "whatsapp": "messaging.channels.nowhere.Missing",
    }
    assert not run_deliver(later + timedelta(minutes=1)).ok

    logged = everything_logged(capture_everything)
    out, err = capsys.readouterr()
    assert len(capture_everything.records) > 50, "nothing was captured: the test proves nothing"
    # Not vacuous: the secrets really travelled, and were really logged around.
    assert "<bot-token>" in logged  # the Bot API URL was logged, token redacted
    echoed = " ".join(repr(r.headers) + r.raw_body.decode() for r in calendar.requests)
    assert REFRESH_TOKEN in echoed or ACCESS_TOKEN in echoed  # and were echoed back
    assert CLIENT_SECRET in echoed or ACCESS_TOKEN in echoed
    assert any("Basic " in repr(r.headers) for r in twilio.requests)
    assert leaks(logged) == []
    assert leaks(out + err) == []
    assert leaks(stored_text()) == []


@pytest.mark.django_db(transaction=True)
def test_a_deliver_process_at_debug_leaks_no_secret(make_user, providers):
    twilio, telegram, _ = providers
    now = timezone.now().replace(microsecond=0)
    queue_failing_sends(make_user, twilio, telegram, now)
    env = subprocess_env(
        LOG_LEVEL="DEBUG",
        TWILIO_ACCOUNT_SID=ACCOUNT_SID,
        TWILIO_AUTH_TOKEN=TWILIO_TOKEN,
        TWILIO_WHATSAPP_FROM="+14155238886",
        TWILIO_API_BASE_URL=twilio.url,
        TELEGRAM_BOT_TOKEN=BOT_TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        CHANNEL_TIMEOUT_SECONDS="0.5",
        NUDGE_CHANNEL_BACKENDS="{}",
    )
    outputs = []
    for token_env in ({}, {"TELEGRAM_BOT_TOKEN": WRONG_BOT_TOKEN}):
        process = manage(
            "deliver",
            "--now",
            now.isoformat(),
            "--simulated-clock",
            "--verbosity",
            "3",
            env={**env, **token_env},
        )
        outputs.append(process.communicate(timeout=120))
        now += timedelta(minutes=1)
    text = "\n".join(out + err for out, err in outputs)
    assert "sweep finished" in text, text[-2000:]
    assert leaks(text) == []
    assert leaks(stored_text()) == []
