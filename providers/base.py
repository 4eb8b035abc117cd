"""The provider interface, its errors, and the HTTP plumbing every provider shares.

A provider never touches tenant data: ``sync`` reads a ``ConnectionSnapshot``
inside the owner's tenant scope, closes the scope, hands the snapshot to
``fetch`` (network only), then opens the scope again to write what came back.
Refreshed tokens travel back on the snapshot itself (``credentials_changed``),
so they are stored even when the events call that follows them fails. The
one table a provider request touches is the shared pacing budget
(:func:`provider_request`), outside any transaction while it waits.
"""

from __future__ import annotations

import http.cookiejar
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import requests

from core.config import NudgeConfig
from core.http_retry_after import parse_retry_after
from pacing.pacer import Budget, request_rate_limited, wait_for_request_slot
from providers.crypto import scrub

# --- The per-process call counter ------------------------------------------------

_calls: Counter[tuple[str, str]] = Counter()
_calls_lock = threading.Lock()
# The same count for the calling thread alone: a connection's fetch runs on one
# thread, so concurrent syncs can each tell their own requests (``calls_in_thread``).
_thread_calls = threading.local()

CallKind = Literal["api", "token"]


def record_call(provider: str, kind: CallKind) -> None:
    """Count one HTTP request made to a provider (``api``: events/feed; ``token``: OAuth)."""
    with _calls_lock:
        _calls[(provider, kind)] += 1
    _thread_calls.count = getattr(_thread_calls, "count", 0) + 1


def calls_in_thread() -> int:
    """Requests made by the calling thread so far (every provider and kind)."""
    return getattr(_thread_calls, "count", 0)


def call_count(provider: str | None = None, kind: CallKind | None = None) -> int:
    """Requests made by this process so far, optionally for one provider and/or kind."""
    with _calls_lock:
        return sum(
            n
            for (p, k), n in _calls.items()
            if (provider is None or p == provider) and (kind is None or k == kind)
        )


def reset_call_counter() -> None:
    with _calls_lock:
        _calls.clear()


# --- Errors --------------------------------------------------------------------


class ProviderError(Exception):
    """A connection's sync failed; the message is safe to log and store (no secrets)."""

    outcome = "error"


class NeedsReauth(ProviderError):
    """Consent was revoked or the refresh token is dead: only the user can fix it."""

    outcome = "needs_reauth"


class RetryLater(ProviderError):
    """Rate limited (429) or the provider is unavailable (5xx, network): back off."""

    outcome = "retry_later"

    def __init__(self, message: str, retry_after: timedelta | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MalformedPayload(ProviderError):
    """The provider's answer cannot be used as a whole; the previous copy is kept."""

    outcome = "malformed"


# --- What goes in and what comes out -----------------------------------------


@dataclass
class ConnectionSnapshot:
    """What a provider may know about one connection, read inside the tenant scope.

    Secrets are excluded from ``repr`` so a snapshot in a traceback leaks nothing.
    """

    connection_id: int
    user_id: int
    provider: str
    calendar_id: str
    account: str
    sync_state: dict[str, Any]
    full_sync: bool
    # The knobs the sync runs with (timeouts, budgets, request rates), from its entry point.
    config: NudgeConfig = field(repr=False)
    allow_private_network: bool = False
    access_token: str = field(default="", repr=False)
    refresh_token: str = field(default="", repr=False)
    token_expires_at: datetime | None = None
    feed_url: str = field(default="", repr=False)
    credentials_changed: bool = False
    # The reader: their zone gives floating ICS times a meaning, their e-mail
    # addresses recognise the invitations they declined.
    owner_timezone: str = ""
    owner_emails: tuple[str, ...] = field(default=(), repr=False)
    # time.monotonic() by which this connection's sync must be done (its budget).
    deadline: float | None = None

    def secrets(self) -> tuple[str, ...]:
        return (self.access_token, self.refresh_token, self.feed_url)

    def update_tokens(
        self, *, access_token: str, expires_at: datetime | None, refresh_token: str | None
    ) -> None:
        """Record refreshed tokens; ``sync`` writes them back whatever happens next."""
        self.access_token = access_token
        self.token_expires_at = expires_at
        if refresh_token:
            self.refresh_token = refresh_token
        self.credentials_changed = True


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
    """A provider's answer for one run.

    ``changed=False`` means "nothing to write" (an ICS 304); otherwise ``events``
    is the connection's complete set, and local rows not in it are deleted.
    """

    changed: bool
    events: list[ProviderEvent] = field(default_factory=list)
    sync_state: dict[str, Any] = field(default_factory=dict)
    skipped_events: int = 0
    cancelled_events: int = 0
    # Events skipped or repaired, in words support can act on (no secrets, no titles).
    problems: list[str] = field(default_factory=list)
    # A name the feed gives itself (ICS X-WR-CALNAME), for the connection's label.
    calendar_name: str = ""


class CalendarProvider(ABC):
    """One calendar service. ``fetch`` makes at most one events request per page
    (one page covers a normal calendar's window) plus a token refresh when due;
    after a 401 the OAuth providers refresh once and ask for that page again."""

    name: str

    @abstractmethod
    def fetch(
        self,
        snapshot: ConnectionSnapshot,
        *,
        now: datetime,
        window_start: datetime,
        window_end: datetime,
    ) -> FetchResult:
        """Return the connection's events overlapping the window; raise ProviderError."""


class BudgetExceeded(RetryLater):
    """The connection's sync ran out of its time budget; abandoned, the copy kept."""


def time_left(snapshot: ConnectionSnapshot, provider: str) -> float:
    """Seconds left of the connection's sync budget (CALENDAR_SYNC_BUDGET_SECONDS);
    BudgetExceeded once it is spent, so one connection cannot hold up the sweep."""
    budget = snapshot.config.calendar_sync_budget_seconds
    if snapshot.deadline is None:
        return budget
    left = snapshot.deadline - time.monotonic()
    if left <= 0:
        raise BudgetExceeded(
            f"{provider}: the sync took longer than its {budget:.0f}s budget; abandoned",
            retry_after=timedelta(hours=1),
        )
    return left


# --- HTTP ------------------------------------------------------------------------


def retry_after_delay(response: requests.Response, now: datetime) -> timedelta | None:
    """The response's Retry-After as a RetryLater delay; None when absent or unusable."""
    seconds = parse_retry_after(response.headers.get("Retry-After"), now=now)
    return None if seconds is None else timedelta(seconds=seconds)


# A 429 (or a 403 the provider calls a rate limit) without Retry-After pauses
# the provider's budget this long.
DEFAULT_RATE_LIMIT_PAUSE = timedelta(seconds=10)


def request_budgets(provider: str, user_id: int, config: NudgeConfig) -> list[Budget]:
    """The shared budgets one request to ``provider`` for ``user_id`` spends, app-wide
    first: Google per project and per user, Graph per app and per mailbox (the
    user's, as one nudge user reads one mailbox). Feeds have none.

    Google's project budget may burst (``CALENDAR_GOOGLE_PROJECT_BURST``): Google
    counts a sliding minute, so a run of many users need not be spaced evenly
    under it. The per-user and Graph budgets are spaced evenly: one user's few
    calendars gain little from a burst, and Graph's app rate is far above what
    a sync asks."""
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


def _wait_for_slot(provider: str, budgets: list[Budget], snapshot: ConnectionSnapshot) -> None:
    """Wait (no transaction held) for the request's slot in every budget; RetryLater
    when there is none within the HTTP timeout or the connection's budget, as when
    a 429 paused the provider: this connection is tried again next cycle, and the
    thread is free for a provider that is not paused."""
    config = snapshot.config
    max_wait = min(config.calendar_http_timeout_seconds, time_left(snapshot, provider))
    if not wait_for_request_slot(budgets, max_wait, config):
        raise RetryLater(
            f"{provider}: rate limited; no request slot within {max_wait:.0f}s",
            retry_after=timedelta(seconds=max_wait),
        )


_thread_sessions = threading.local()
# A forked process (a pre-forking server's worker) opens its own connections: a kept-alive
# socket shared with the parent would interleave two processes' requests.
os.register_at_fork(after_in_child=lambda: _thread_sessions.__dict__.clear())


def _session() -> requests.Session:
    """This thread's HTTP session for the providers' APIs.

    Its connections are kept and reused, as Google and Graph expect, instead
    of a new session, connection and (in production) TLS handshake per
    request; and it keeps no cookies, so nothing one tenant's response set
    travels with another tenant's request. Each fetch thread has its own: a
    session is not shared between threads.
    """
    session = getattr(_thread_sessions, "session", None)
    if session is None:
        session = requests.Session()
        session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        _thread_sessions.session = session
    return session


def provider_request(
    provider: str,
    kind: CallKind,
    method: str,
    url: str,
    *,
    secrets: tuple[str, ...] = (),
    paced_for: ConnectionSnapshot | None = None,
    is_rate_limit_403: Callable[[requests.Response], bool] | None = None,
    timeout: float,
    **kwargs: Any,
) -> requests.Response:
    """One counted request with the calendar timeout; network failures become RetryLater.

    With ``paced_for`` (the connection it serves), the request first waits for
    its slot in the provider's shared budgets (:func:`request_budgets`, paced
    across every process and thread by ``pacing/pacer.py``), and a
    429 — or a 403 that ``is_rate_limit_403`` calls a rate limit — pauses the
    provider-wide budget for its Retry-After and lowers its rate, for every
    process; other providers go on.

    The exception text of a failed connection can contain the URL, so it is
    reduced to the exception's type and scrubbed of the connection's secrets.
    """
    budgets = (
        request_budgets(provider, paced_for.user_id, paced_for.config)
        if paced_for is not None
        else []
    )
    if paced_for is not None and budgets:
        _wait_for_slot(provider, budgets, paced_for)
        timeout = min(timeout, time_left(paced_for, provider))
    record_call(provider, kind)
    try:
        response = _session().request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        message = scrub(f"{provider}: network error ({type(exc).__name__})", *secrets)
        raise RetryLater(message) from None
    status = response.status_code
    rate_403 = status == 403 and is_rate_limit_403 is not None and is_rate_limit_403(response)
    if budgets and (status == 429 or rate_403):
        delay = retry_after_delay(response, datetime.now(UTC)) or DEFAULT_RATE_LIMIT_PAUSE
        request_rate_limited(budgets[0], delay.total_seconds(), paced_for.config)
    return response


def json_body(response: requests.Response, provider: str) -> dict[str, Any]:
    """The response as a JSON object, or MalformedPayload."""
    try:
        body = response.json()
    except ValueError:
        raise MalformedPayload(f"{provider}: response is not JSON") from None
    if not isinstance(body, dict):
        raise MalformedPayload(f"{provider}: response is not a JSON object")
    return body


def oauth_error_code(response: requests.Response) -> str:
    """The OAuth ``error`` code of a token endpoint's error response, or ''."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"][:64]
    return ""


def raise_for_transient(response: requests.Response, provider: str, now: datetime) -> None:
    """429 and 5xx: back off, honouring Retry-After."""
    if response.status_code == 429 or response.status_code >= 500:
        delay = retry_after_delay(response, now)
        raise RetryLater(f"{provider}: HTTP {response.status_code}", retry_after=delay)


def covered_window(window_start: datetime, window_end: datetime) -> dict[str, Any]:
    """What a Google or Graph fetch stores in ``sync_state``: the window its copy covers."""
    return {"window_start": window_start.isoformat(), "window_end": window_end.isoformat()}
