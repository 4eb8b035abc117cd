"""A fake ICS feed host: a secret feed address, ETag / Last-Modified, 304s, faults.

The feed is served at ``/feeds/<secret>/basic.ics`` (as Google's "secret
address in iCal format" is). Conditional requests get a 304 when the body is
unchanged; ``etags=False`` serves no validators at all. ``next_answers``
scripts the next answers (429, 500, a redirect); ``gzip_body=True`` sends the
body gzip-encoded, so a small download can expand past the size bound.
``latency`` holds every answer back that many seconds (a real host's round
trip), and ``max_in_flight`` is the most requests it was answering at once.

    with FakeIcsFeed() as feed:
        feed.body = ICS_TEXT
        url = feed.feed_url
"""

from __future__ import annotations

import gzip
import hashlib
import secrets
import time
from email.utils import formatdate
from urllib.parse import urlsplit

from tests.fakes.base import Answer, FakeProviderServer, RecordedRequest


class FakeIcsFeed(FakeProviderServer):
    def __init__(self) -> None:
        super().__init__()
        self.secret = f"private-{secrets.token_hex(12)}"
        self.reset_state()

    def reset_state(self) -> None:
        self._body = b""
        self.etags = True
        self.gzip_body = False
        self.last_modified = formatdate(time.time() - 3600, usegmt=True)
        self.next_answers: list[Answer] = []
        self.full_responses = 0
        self.not_modified = 0
        self.latency = 0.0
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def feed_path(self) -> str:
        return f"/feeds/{self.secret}/basic.ics"

    @property
    def feed_url(self) -> str:
        return f"{self.url}{self.feed_path}"

    @property
    def body(self) -> bytes:
        return self._body

    @body.setter
    def body(self, value: bytes | str) -> None:
        with self.lock:
            self._body = value.encode() if isinstance(value, str) else value
            self.last_modified = formatdate(time.time(), usegmt=True)

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self._body).hexdigest()[:16] + '"'

    def feed_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path == self.feed_path]

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                self.stopping.wait(self.latency)
            return self._answer(method, path, headers)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _answer(self, method: str, path: str, headers: dict[str, str]) -> Answer:
        parts = urlsplit(path)
        self.record(RecordedRequest(method, parts.path, headers, {}, b"", time.time()))
        with self.lock:
            scripted = self.next_answers.pop(0) if self.next_answers else None
            content, etag, modified = self._body, self.etag, self.last_modified
        if scripted:
            return scripted
        if parts.path != self.feed_path or method != "GET":
            return Answer(404, b"Not Found", (("Content-Type", "text/plain"),))
        validators: tuple[tuple[str, str], ...] = ()
        if self.etags:
            validators = (("ETag", etag), ("Last-Modified", modified))
            if headers.get("If-None-Match") == etag:
                with self.lock:
                    self.not_modified += 1
                return Answer(304, b"", validators)
        with self.lock:
            self.full_responses += 1
        extra: tuple[tuple[str, str], ...] = ()
        if self.gzip_body:
            content = gzip.compress(content)
            extra = (("Content-Encoding", "gzip"),)
        return Answer(
            200, content, (("Content-Type", "text/calendar; charset=utf-8"), *validators, *extra)
        )
