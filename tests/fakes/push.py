"""What the fake Google and Graph servers share for push: a clock and a poster.

A provider's channels and subscriptions expire by the provider's clock;
tests replay days in minutes, so each fake reads :attr:`PushClock.now`
(real time unless a test sets it). Notifications are real HTTP POSTs to the
app's endpoint; every one is recorded with the app's answer. Google's first
``sync`` message goes out just after the channel is created, from a thread
of its own (as Google does, it may arrive before the app has stored the
channel); the thread is joined when the fake stops.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import requests


@dataclass(frozen=True)
class Posted:
    url: str
    headers: dict[str, str]
    body: Any
    status: int  # the app's answer; 0 when it could not be reached
    elapsed: float


class PushPoster:
    def __init__(self) -> None:
        self.clock: datetime | None = None
        self.posted: list[Posted] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def now(self) -> datetime:
        return self.clock or datetime.now(UTC)

    def post(
        self, url: str, *, headers: dict[str, str], json_body: Any = None, timeout: float = 10.0
    ) -> Posted:
        started = time.monotonic()
        try:
            response = requests.post(url, headers=headers, json=json_body, timeout=timeout)
            status = response.status_code
        except requests.RequestException:
            status = 0
        posted = Posted(url, headers, json_body, status, time.monotonic() - started)
        with self._lock:
            self.posted.append(posted)
        return posted

    def replay(self, posted: Posted) -> Posted:
        """Send a recorded notification again, byte for byte what was captured."""
        return self.post(posted.url, headers=posted.headers, json_body=posted.body)

    def post_later(self, url: str, *, headers: dict[str, str], delay: float = 0.05) -> None:
        def send() -> None:
            time.sleep(delay)
            self.post(url, headers=headers)

        thread = threading.Thread(target=send, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def join(self) -> None:
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout=15)

    def reset(self) -> None:
        self.join()
        with self._lock:
            self.posted.clear()
        self.clock = None
