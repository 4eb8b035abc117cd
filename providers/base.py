"""What every provider shares: the snapshot it gets, what it returns, its errors, HTTP.

A provider never touches tenant data: it gets a ``ConnectionSnapshot`` and returns what it
fetched; refreshed tokens travel back on the snapshot (``credentials_changed``), so they are
stored even when a later call fails. Its one table is the shared pacing budget.
"""

from __future__ import annotations

import http.cookiejar
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from core.config import NudgeConfig
from core.http_retry_after import parse_retry_after
from pacing.pacer import Budget, request_rate_limited, wait_for_request_slot

# A connection's fetch runs on one thread, so concurrent syncs can each count their own.
_thread_calls = threading.local()


def record_call() -> None:
    _thread_calls.count = getattr(_thread_calls, "count", 0) + 1


def calls_in_thread() -> int:
    return getattr(_thread_calls, "count", 0)


class ProviderError(Exception):
    """A connection's sync failed; the message is safe to log and store (no secrets)."""


class NeedsReauth(ProviderError):
    """Consent was revoked or the refresh token is dead: only the user can fix it."""


class RetryLater(ProviderError):
    """Rate limited (429) or the provider is unavailable (5xx, network): back off."""

    def __init__(self, message: str, retry_after: timedelta | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MalformedPayload(ProviderError):
    """The provider's answer cannot be used as a whole; the previous copy is kept."""


@dataclass
class ConnectionSnapshot:
    """What a provider may know about one connection; secrets stay out of ``repr``."""

    connection_id: int
    user_id: int
    provider: str
    calendar_id: str
    account: str
    sync_state: dict[str, Any]
    full_sync: bool
    config: NudgeConfig = field(repr=False)
    allow_private_network: bool = False
    access_token: str = field(default="", repr=False)
    refresh_token: str = field(default="", repr=False)
    token_expires_at: datetime | None = None
    feed_url: str = field(default="", repr=False)
    credentials_changed: bool = False
    # Their zone gives floating ICS times a meaning; their addresses spot declined invitations.
    owner_timezone: str = ""
    owner_emails: tuple[str, ...] = field(default=(), repr=False)
    # time.monotonic() by which this connection's sync must be done (its budget).
    deadline: float | None = None

    def secrets(self) -> tuple[str, ...]:
        return (self.access_token, self.refresh_token, self.feed_url)


@dataclass(frozen=True)
class ProviderEvent:
    """One occurrence as the provider reports it, already normalised to UTC."""

    provider_event_id: str
    occurrence_start: datetime | None
    title: str
    starts_at: datetime
    ends_at: datetime | None
    all_day: bool
    status: str
    declined: bool
    reminder_minutes: tuple[int, ...]
    location: str = ""
    join_url: str = ""  # only ever a link that passed the known-meeting-host check

    @property
    def key(self) -> tuple[str, datetime | None]:
        return (self.provider_event_id, self.occurrence_start)


@dataclass
class FetchResult:
    """A provider's answer: ``changed=False`` is "nothing to write"; otherwise ``events`` is
    the connection's complete set, and local rows not in it are deleted."""

    changed: bool
    events: list[ProviderEvent] = field(default_factory=list)
    sync_state: dict[str, Any] = field(default_factory=dict)
    skipped_events: int = 0
    problems: list[str] = field(default_factory=list)  # for support: no secrets, no titles
    calendar_name: str = ""


class BudgetExceeded(RetryLater):
    """The connection's sync ran out of its time budget; abandoned, the copy kept."""


def time_left(snapshot: ConnectionSnapshot) -> float:
    """Seconds left of the connection's sync budget; BudgetExceeded once it is spent."""
    budget = snapshot.config.calendar_sync_budget_seconds
    if snapshot.deadline is None:
        return budget
    left = snapshot.deadline - time.monotonic()
    if left <= 0:
        raise BudgetExceeded(
            f"{snapshot.provider}: the sync took longer than its {budget:.0f}s budget; abandoned",
            retry_after=timedelta(hours=1),
        )
    return left


def retry_after_delay(headers: Mapping[str, str], now: datetime) -> timedelta | None:
    """A response's Retry-After as a RetryLater delay; None when absent or unusable."""
    seconds = parse_retry_after(headers.get("Retry-After"), now=now)
    return None if seconds is None else timedelta(seconds=seconds)


# How long a rate limit without Retry-After pauses the provider's budget.
DEFAULT_RATE_LIMIT_PAUSE = timedelta(seconds=10)


def request_budgets(provider: str, user_id: int, config: NudgeConfig) -> list[Budget]:
    """The shared budgets one request spends, app-wide first (feeds have none). Only
    Google's project budget may burst: Google counts a sliding minute."""
    if provider == "google":
        return [
            Budget(
                "google",
                config.google_project_rate_per_minute / 60,
                burst=config.google_project_burst,
            ),
            Budget(f"google:user:{user_id}", config.google_user_rate_per_minute / 60),
        ]
    if provider == "microsoft":
        return [
            Budget("graph", config.graph_app_rate_per_minute / 60),
            Budget(f"graph:mailbox:{user_id}", config.graph_mailbox_rate_per_minute / 60),
        ]
    return []


_thread_sessions = threading.local()
# A kept-alive socket shared with a forked child would interleave two processes' requests.
os.register_at_fork(after_in_child=lambda: _thread_sessions.__dict__.clear())


def _session() -> requests.Session:
    """This thread's HTTP session: connections kept for reuse, and no cookies, so nothing
    one tenant's response set travels with another tenant's request."""
    session = getattr(_thread_sessions, "session", None)
    if session is None:
        session = requests.Session()
        session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        _thread_sessions.session = session
    return session


def provider_request(
    provider: str,
    method: str,
    url: str,
    *,
    paced_for: ConnectionSnapshot | None = None,
    is_rate_limit_403: Callable[[requests.Response], bool] | None = None,
    timeout: float,
    **kwargs: Any,
) -> requests.Response:
    """One counted request; network failures become RetryLater, their text reduced to the
    exception's type (its own text can contain the URL, and so a token).

    With ``paced_for`` (the connection it serves) the request first waits for its slot in
    the provider's shared budgets, and a 429, or a 403 that ``is_rate_limit_403`` calls a
    rate limit, pauses and slows the provider's budget for every process.
    """
    budgets = []
    if paced_for is not None:
        budgets = request_budgets(provider, paced_for.user_id, paced_for.config)
    if budgets:
        # No slot in time: RetryLater, so the thread is free for a provider not paused.
        config = paced_for.config
        max_wait = min(config.calendar_http_timeout_seconds, time_left(paced_for))
        if not wait_for_request_slot(budgets, max_wait, config):
            raise RetryLater(
                f"{provider}: rate limited; no request slot within {max_wait:.0f}s",
                retry_after=timedelta(seconds=max_wait),
            )
        timeout = min(timeout, time_left(paced_for))
    record_call()
    try:
        response = _session().request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        raise RetryLater(f"{provider}: network error ({type(exc).__name__})") from None
    status = response.status_code
    rate_403 = status == 403 and is_rate_limit_403 is not None and is_rate_limit_403(response)
    if budgets and (status == 429 or rate_403):
        delay = retry_after_delay(response.headers, datetime.now(UTC)) or DEFAULT_RATE_LIMIT_PAUSE
        request_rate_limited(budgets[0], delay.total_seconds(), paced_for.config)
    return response


def json_body(response: requests.Response, provider: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise MalformedPayload(f"{provider}: response is not JSON") from None
    if not isinstance(body, dict):
        raise MalformedPayload(f"{provider}: response is not a JSON object")
    return body


def raise_for_transient(
    status: int, headers: Mapping[str, str], provider: str, now: datetime
) -> None:
    """A response's status 429 or 5xx: back off, honouring Retry-After."""
    if status == 429 or status >= 500:
        raise RetryLater(f"{provider}: HTTP {status}", retry_after=retry_after_delay(headers, now))


def covers(state: dict[str, Any], start: datetime, end: datetime, keys: tuple[str, str]) -> bool:
    """Whether the window ``state`` stores under ``keys`` (ISO 8601) holds [start, end]."""
    try:
        return (
            datetime.fromisoformat(state[keys[0]]) <= start
            and datetime.fromisoformat(state[keys[1]]) >= end
        )
    except (KeyError, TypeError, ValueError):
        return False
