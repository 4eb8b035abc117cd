"""What the fake provider servers share: a threaded HTTP server, a request log, a fault plan.

A fake answers every *send* call (a message to one recipient) either with
success or with a :class:`Fault`. Which calls fail is scripted with a
:class:`FaultPlan`, so a test can say "the 3rd send gets a 500", "every send
to +15550001 is refused" or — for soak tests — "10 % of sends fail with one of
these faults, from seed 42". Everything is recorded, so tests count messages
where they land (:attr:`FakeProviderServer.delivered`), not where they were sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Fault:
    """One scripted wrong answer.

    ``delay`` holds the answer back (past the client's timeout, it is a
    timeout); ``delivers`` says the provider still sent the message, as a slow
    provider does, so it is counted in ``delivered``.
    """

    name: str
    status: int = 500
    body: Any = None  # dict or list → JSON; str/bytes → sent as is
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    delivers: bool = False

    def encoded_body(self) -> tuple[bytes, str]:
        if isinstance(self.body, dict | list):
            return json.dumps(self.body).encode(), "application/json"
        if isinstance(self.body, str):
            return self.body.encode(), "text/html; charset=utf-8"
        return self.body or b"", "application/octet-stream"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0

    @classmethod
    def json(cls, status: int, payload: Any, *headers: tuple[str, str]) -> Answer:
        return cls(
            status, json.dumps(payload).encode(), (("Content-Type", "application/json"), *headers)
        )

    @classmethod
    def from_fault(cls, fault: Fault) -> Answer:
        body, content_type = fault.encoded_body()
        return cls(
            fault.status, body, (("Content-Type", content_type), *fault.headers), fault.delay
        )


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    params: dict[str, Any]
    raw_body: bytes
    at: float
    outcome: str = ""  # "delivered", a fault's name, or "" for calls that are not sends


@dataclass(frozen=True)
class Delivered:
    """A message the provider accepted: what reached ``recipient``, under which id."""

    recipient: str
    text: str
    message_id: str
    params: dict[str, Any]
    at: float


@dataclass
class FaultPlan:
    """Which send calls get which fault. Call numbers count sends from 1.

    Precedence: a scripted call number, then a recipient rule, then the random rate.
    """

    by_call: dict[int, Fault] = field(default_factory=dict)
    by_recipient: dict[str, list[Any]] = field(default_factory=dict)  # [fault, remaining|None]
    rate: float = 0.0
    rate_faults: Sequence[Fault] = ()
    _rng: random.Random = field(default_factory=lambda: random.Random(0))

    def on_call(self, number: int, fault: Fault) -> Self:
        """Answer send number ``number`` (1-based, counted across all recipients) with ``fault``."""
        self.by_call[number] = fault
        return self

    def on_calls(self, numbers: Sequence[int], fault: Fault) -> Self:
        for number in numbers:
            self.on_call(number, fault)
        return self

    def for_recipient(self, recipient: str, fault: Fault, times: int | None = None) -> Self:
        """Answer sends to ``recipient`` with ``fault``: always, or the next ``times`` sends."""
        self.by_recipient[recipient] = [fault, times]
        return self

    def at_rate(self, probability: float, seed: int, faults: Sequence[Fault]) -> Self:
        """Fail each send with ``probability``, picking among ``faults``; repeatable by ``seed``."""
        self.rate = probability
        self.rate_faults = tuple(faults)
        self._rng = random.Random(seed)
        return self

    def clear(self) -> None:
        self.by_call.clear()
        self.by_recipient.clear()
        self.rate = 0.0
        self.rate_faults = ()

    def choose(self, call_number: int, recipient: str) -> Fault | None:
        """The fault for this send, or None for success. Called under the server's lock."""
        if call_number in self.by_call:
            return self.by_call[call_number]
        rule = self.by_recipient.get(recipient)
        if rule is not None:
            fault, remaining = rule
            if remaining is None:
                return fault
            if remaining > 0:
                rule[1] = remaining - 1
                return fault
        if self.rate and self.rate_faults and self._rng.random() < self.rate:
            return self._rng.choice(self.rate_faults)
        return None


@dataclass
class Quota:
    """A provider's rate limit: more than ``limit`` requests within any ``window``
    seconds (a sliding window, as Google documents) are refused with ``status``
    (429, or Google's 403 ``rateLimitExceeded``) and ``Retry-After``. Only
    requests whose path (without the query) matches ``paths`` count (all when None).
    ``per_caller``: each access token (a user, a mailbox) has a limit of its own,
    as Google's per-user quota and Graph's per-mailbox throttling do."""

    limit: int
    window: float = 1.0
    retry_after: int = 1
    status: int = 429
    paths: re.Pattern[str] | None = None
    per_caller: bool = False
    reason: str = "rateLimitExceeded"
    accepted: deque[float] = field(default_factory=deque)
    refused: int = 0
    counted: int = 0
    callers: dict[str, deque[float]] = field(default_factory=dict)

    def refuses(self, path: str, at: float, caller: str = "") -> bool:
        """Whether this request is over the limit; called under the server's lock."""
        if self.paths is not None and not self.paths.search(urlsplit(path).path):
            return False
        self.counted += 1
        accepted = self.callers.setdefault(caller, deque()) if self.per_caller else self.accepted
        while accepted and accepted[0] <= at - self.window:
            accepted.popleft()
        if len(accepted) >= self.limit:
            self.refused += 1
            return True
        accepted.append(at)
        return False

    def answer(self) -> Answer:
        reason = self.reason
        return Answer.json(
            self.status,
            {
                "error": {
                    "code": self.status,
                    "message": "Rate Limit Exceeded",
                    "errors": [{"reason": reason, "domain": "usageLimits"}],
                }
            },
            ("Retry-After", str(self.retry_after)),
        )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fake = self.server.fake
        answer = fake.over_quota(self.command, self.path, dict(self.headers), body)
        if answer is None:
            answer = fake.answer(self.command, self.path, dict(self.headers), body)
        if answer.delay and self.server.fake.stopping.wait(answer.delay):
            return
        try:
            self.send_response(answer.status)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timed out) before the answer

    do_GET = do_POST = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines carry secrets (the Telegram token is in the path)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver listens with a backlog of 5: a burst of new connections from
    # several deliver processes overflowed it, and the kernel reset connections
    # whose request had already gone out — "hung up without answering" from a
    # fake, which a provider's front end does not do. Listen like a server.
    request_queue_size = 1024

    def __init__(self, fake: FakeProviderServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)
        self._wake, self._waker = socket.socketpair()

    def serve_until_stopped(self) -> None:
        """Accept connections until :meth:`stop_serving`.

        ``serve_forever`` only notices ``shutdown()`` at its next poll, so every
        stop would wait out the poll interval; here the stop wakes the loop itself.
        """
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake:
                        return
                    self._handle_request_noblock()  # one connection, answered on its own thread

    def stop_serving(self) -> None:
        self._waker.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake.close()
        self._waker.close()


def pkce_verifier_matches(challenge: str, verifier: str | None) -> bool:
    """RFC 7636 S256, as the providers check it: no challenge at consent, nothing to check."""
    if not challenge:
        return True
    digest = hashlib.sha256((verifier or "").encode()).digest()
    return bool(verifier) and base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == challenge


class FakeProviderServer:
    """A provider API on 127.0.0.1 at an ephemeral port, served from a thread."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.delivered: list[Delivered] = []
        self.plan = FaultPlan()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.send_calls = 0
        # A rate limit on the provider's API (see Quota); None: unlimited. ``quotas``:
        # more of them, each counted (an app's and a mailbox's, say); the first to refuse answers.
        self.quota: Quota | None = None
        self.quotas: list[Quota] = []
        # Every answer (a refusal too) held back this long: a real service's round trip.
        self.api_latency = 0.0
        # Requests held in that round trip at once, and the most there were.
        self.in_flight = self.max_in_flight = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle -------------------------------------------------------
    def start(self) -> Self:
        self.stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_until_stopped, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.stop_serving()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._server is not None:
            self._server.server_close()
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- state ------------------------------------------------------------
    def reset(self) -> None:
        """Forget requests and faults (between tests sharing one server)."""
        with self.lock:
            self.requests.clear()
            self.delivered.clear()
            self.plan.clear()
            self.send_calls = 0
            self.reset_state()

    def reset_state(self) -> None:
        """Provider-specific state to forget in :meth:`reset`."""

    def record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def deliver(self, delivered: Delivered) -> None:
        with self.lock:
            self.delivered.append(delivered)

    def delivered_to(self, recipient: str) -> list[Delivered]:
        with self.lock:
            return [d for d in self.delivered if d.recipient == recipient]

    def sends(self) -> list[RecordedRequest]:
        """Every send call, delivered or not."""
        with self.lock:
            return [r for r in self.requests if r.outcome]

    def next_send(self, recipient: str) -> tuple[int, Fault | None]:
        """Count a send call and decide its fate, atomically."""
        with self.lock:
            self.send_calls += 1
            return self.send_calls, self.plan.choose(self.send_calls, recipient)

    def over_quota(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Answer | None:
        """The quota's refusal for this request (recorded), or None to answer it."""
        if self.api_latency:
            with self.lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.stopping.wait(self.api_latency)
            with self.lock:
                self.in_flight -= 1
        caller = headers.get("Authorization", "")
        with self.lock:
            at = time.monotonic()
            quotas = [q for q in (self.quota, *self.quotas) if q is not None]
            quota = next((q for q in quotas if q.refuses(path, at, caller)), None)
        if quota is None:
            return None
        recorded = RecordedRequest(
            method, urlsplit(path).path, headers, {}, body, time.time(), "rate-limited"
        )
        self.record(recorded)
        return quota.answer()

    # --- to implement -----------------------------------------------------
    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        raise NotImplementedError
