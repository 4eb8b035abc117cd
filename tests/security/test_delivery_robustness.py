"""Broken answers on the delivery side never strand a batch.

A channel that raises something nobody planned for, or a provider whose
answer has missing fields or the wrong types, costs that one row a retry (or
a clear failure) — the rest of the batch is still sent in the same run, and
the run log says something went wrong.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

import pytest
from django.utils import timezone

from messaging.channels.base import NudgeMessage, SendReceipt
from scheduled_sends.failures import FailureKind
from scheduled_sends.models import SweepRun
from sweeps.deliver import run_deliver
from tests.channels.queue import queue_follow_up, reload
from tests.fakes.base import Fault
from tests.support.recording import RecordingChannel

pytestmark = pytest.mark.django_db


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("even the message is broken")


def _encode_error() -> Exception:
    try:
        "\ud800".encode("ascii")
    except UnicodeEncodeError as exc:
        return exc
    raise AssertionError("unreachable")


BEHAVE = object()  # the channel works


class ExplodingChannel(RecordingChannel):
    """Records like the recording channel, except for one address."""

    bad_address: ClassVar[str] = ""
    behaviour: ClassVar[object] = BEHAVE

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        if address == self.bad_address and self.behaviour is not BEHAVE:
            behaviour = self.behaviour
            if isinstance(behaviour, BaseException):
                raise behaviour
            return behaviour  # a malformed receipt
        return super().send(address, message)


@pytest.fixture
def exploding(settings, recording_channel):
    path = f"{__name__}.ExplodingChannel"
    settings.NUDGE_CHANNEL_BACKENDS = {"console": path, "telegram": path, "whatsapp": path}
    yield ExplodingChannel
    ExplodingChannel.behaviour = BEHAVE


@pytest.fixture
def batch(make_user):
    """Five due nudges for five users; the third user's channel misbehaves."""
    now = timezone.now().replace(microsecond=0)
    users = [make_user() for _ in range(5)]
    rows = [
        queue_follow_up(user, f"Task {i}", now=now, fired_ago=timedelta(seconds=50 - i))
        for i, user in enumerate(users)
    ]
    return now, users, rows


def _bad(exploding, users, behaviour):
    exploding.bad_address = f"user:{users[2].pk}"
    exploding.behaviour = behaviour


@pytest.mark.parametrize(
    "error",
    [
        KeyError("result"),
        TypeError("'NoneType' object is not subscriptable"),
        AttributeError("'dict' object has no attribute 'sid'"),
        ValueError("Expecting value: line 1 column 1 (char 0)"),
        RecursionError("maximum recursion depth exceeded"),
        MemoryError(),
        _encode_error(),
        Unprintable(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_unexpected_exception_costs_one_retry_not_the_batch(exploding, batch, error):
    now, users, rows = batch
    _bad(exploding, users, error)
    report = run_deliver(now)
    assert (report.claimed, report.sent, report.retried) == (5, 4, 1), report.summary()
    bad = reload(rows[2])
    assert bad.outcome is None and bad.claimed_at is None and bad.attempts == 1
    assert type(error).__name__ in bad.last_error
    assert all(reload(row).outcome == "sent" for i, row in enumerate(rows) if i != 2)
    run = SweepRun.objects.filter(sweep="deliver").latest("started_at")
    assert run.status == "failed" and type(error).__name__ in run.error
    # The next run, with the channel behaving again, sends it: nothing was stranded.
    exploding.behaviour = BEHAVE
    assert run_deliver(now + timedelta(minutes=1)).sent == 1


@pytest.mark.parametrize(
    "receipt",
    [
        None,
        SendReceipt(provider_message_id=None),  # type: ignore[arg-type]
        SendReceipt(provider_message_id=12345),  # type: ignore[arg-type]
        {"sid": "SM1"},
    ],
    ids=["none", "none-id", "int-id", "dict"],
)
def test_a_malformed_receipt_does_not_strand_the_batch(exploding, batch, receipt):
    now, users, rows = batch
    _bad(exploding, users, receipt)
    report = run_deliver(now)
    assert (report.claimed, report.sent, report.failed) == (5, 4, 1)
    bad = reload(rows[2])
    assert bad.outcome == "failed" and "no usable message id" in bad.last_error
    assert bad.failure_kind == FailureKind.UNUSABLE_RECEIPT
    assert all(reload(row).outcome == "sent" for i, row in enumerate(rows) if i != 2)


# --- through the real channels and the fake providers -------------------------


def _settled_or_released(row) -> bool:
    """Failed for good, or handed back for a retry: either way, not held by a claim."""
    return row.outcome == "failed" or (row.outcome is None and row.claimed_at is None)


def _answer(status: int, body, name: str) -> Fault:
    return Fault(name=name, status=status, body=body)


@pytest.mark.parametrize(
    "fault",
    [
        _answer(201, {"status": "queued"}, "no-sid"),
        _answer(201, "not json at all", "not-json"),
        _answer(201, b"", "empty"),
        _answer(200, {"sid": None, "status": "queued"}, "null-sid"),
        _answer(400, {"unexpected": True}, "error-without-code"),
        _answer(500, ["a", "list"], "list-body"),
    ],
    ids=lambda f: f.name,
)
def test_twilio_answers_with_missing_fields_or_wrong_types(
    twilio_settings, fake_twilio, make_user, fault
):
    now = timezone.now().replace(microsecond=0)
    users = [make_user(channel="whatsapp", whatsapp_number=f"+1415555010{i}") for i in range(3)]
    rows = [queue_follow_up(user, f"Task {i}", now=now) for i, user in enumerate(users)]
    fake_twilio.plan.for_recipient("whatsapp:+14155550101", fault)
    report = run_deliver(now)
    assert report.claimed == 3 and report.sent == 2, report.summary()
    bad = reload(rows[1])
    assert _settled_or_released(bad) and bad.last_error
    assert [reload(rows[i]).outcome for i in (0, 2)] == ["sent", "sent"]


def test_twilio_sid_of_the_wrong_type(twilio_settings, fake_twilio, make_user):
    now = timezone.now().replace(microsecond=0)
    users = [make_user(channel="whatsapp", whatsapp_number=f"+1415555010{i}") for i in range(3)]
    for i, user in enumerate(users):
        queue_follow_up(user, f"Task {i}", now=now)
    fake_twilio.plan.for_recipient(
        "whatsapp:+14155550101", _answer(201, {"sid": 12345, "status": "queued"}, "int-sid")
    )
    report = run_deliver(now)
    assert (report.claimed, report.sent, report.failed) == (3, 2, 1), report.summary()
    # Accepted, but unreadable: probably delivered, so failed for support to see, not resent.
    assert run_deliver(now + timedelta(minutes=1)).claimed == 0
    assert len(fake_twilio.sends()) == 3


@pytest.mark.parametrize(
    "fault",
    [
        _answer(200, {"ok": True, "result": {"date": 0}}, "no-message-id"),
        _answer(200, {"ok": True, "result": "a string"}, "result-string"),
        _answer(200, {"ok": True}, "no-result"),
        _answer(200, "<html>proxy</html>", "html"),
        _answer(400, {"ok": False}, "no-description"),
        _answer(429, {"ok": False, "parameters": {"retry_after": "soon"}}, "bad-retry"),
    ],
    ids=lambda f: f.name,
)
def test_telegram_answers_with_missing_fields_or_wrong_types(
    telegram_settings, fake_telegram, make_user, fault
):
    now = timezone.now().replace(microsecond=0)
    users = [make_user(channel="telegram", telegram_chat_id=str(5000 + i)) for i in range(3)]
    rows = [queue_follow_up(user, f"Task {i}", now=now) for i, user in enumerate(users)]
    fake_telegram.plan.for_recipient("5001", fault)
    report = run_deliver(now)
    assert report.claimed == 3 and report.sent == 2, report.summary()
    bad = reload(rows[1])
    assert _settled_or_released(bad) and bad.last_error
    assert [reload(rows[i]).outcome for i in (0, 2)] == ["sent", "sent"]


# --- a provider that takes the message and hangs up without answering ---------------


class HangUpServer:
    """Reads each request whole, counts the sends it "accepted", then closes the
    connection without a word — what a provider (or a proxy in front of it) does
    when it dies between queueing a message and answering. Telegram's ``getMe``
    is answered normally so the bot initialises."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sends: list[bytes] = []
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                self._handle(conn)

    def _handle(self, conn) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            body += conn.recv(65536)
        request_line = head.split(b"\r\n", 1)[0]
        if b"/getMe" in request_line:
            payload = (
                b'{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"N","username":"n_bot"}}'
            )
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            return
        self.sends.append(body)  # the provider has it; the answer never comes


def test_whatsapp_hang_up_after_the_request_is_not_resent(twilio_settings, make_user, settings):
    now = timezone.now().replace(microsecond=0)
    user = make_user(channel="whatsapp", whatsapp_number="+14155550177")
    row = queue_follow_up(user, "T", now=now)
    with HangUpServer() as server:
        settings.TWILIO_API_BASE_URL = server.url
        run_deliver(now)
        run_deliver(now + timedelta(minutes=2))
        run_deliver(now + timedelta(minutes=4))
    assert len(server.sends) == 1, f"the provider got it {len(server.sends)} times"
    assert reload(row).outcome == "failed"


def test_telegram_hang_up_after_the_request_is_not_resent(telegram_settings, make_user, settings):
    now = timezone.now().replace(microsecond=0)
    row = queue_follow_up(make_user(channel="telegram", telegram_chat_id="7077"), "T", now=now)
    with HangUpServer() as server:
        settings.TELEGRAM_API_BASE_URL = f"{server.url}/bot"
        run_deliver(now)
        run_deliver(now + timedelta(minutes=2))
        run_deliver(now + timedelta(minutes=4))
    assert len(server.sends) == 1, f"the provider got it {len(server.sends)} times"
    assert reload(row).outcome == "failed"


def test_a_refused_connection_is_retried(twilio_settings, make_user, settings):
    """The other side of the line: nothing left our machine, so retrying is right."""
    now = timezone.now().replace(microsecond=0)
    user = make_user(channel="whatsapp", whatsapp_number="+14155550178")
    row = queue_follow_up(user, "T", now=now)
    with HangUpServer() as server:
        url = server.url
    settings.TWILIO_API_BASE_URL = url  # closed: connection refused
    report = run_deliver(now)
    assert report.retried == 1
    bad = reload(row)
    assert bad.outcome is None and bad.attempts == 1 and "[network]" in bad.last_error
