"""Fetching an ICS feed: a conditional GET through ``untrusted_fetch``, bounded.

The feed's address is a secret (it grants read access to the calendar), so it is only ever
shown as its host. Redirects are followed by hand so every hop is vetted and pinned like the
first. The download is cut at ``DOWNLOAD_SECONDS`` and the body at ``ICS_MAX_BYTES``
after decompression.
"""

from __future__ import annotations

import re
from datetime import datetime

import urllib3
from urllib3.exceptions import LocationParseError

from providers import untrusted_fetch
from providers.base import (
    ConnectionSnapshot,
    NeedsReauth,
    ProviderError,
    raise_for_transient,
    time_left,
)
from providers.untrusted_fetch import Answer, Deadline, bounded_body, parse_target, vetted_address

NAME = "ics"
DOWNLOAD_SECONDS = 30.0
# The address was reset or revoked: only the user can fix it (CDNs send 403 for passing reasons).
_GONE = {401, 404, 410}


def feed_host(url: str) -> str:
    """The part of a feed address that may be shown: its host, as the client reads it."""
    try:
        return urllib3.util.parse_url(url).host or "?"
    except LocationParseError:
        return "?"


def feed_origin(url: str) -> str:
    """``host:port``, what the sweep's per-host cap counts. Never shown: part of a secret."""
    try:
        parsed = urllib3.util.parse_url(url)
    except LocationParseError:
        return "?"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{(parsed.host or '?').lower()}:{port}"


def feed_address(url: str) -> str:
    """The address as fetched: trimmed, and ``webcal://`` (Apple's) read as ``https://``."""
    return re.sub(r"^webcals?://", "https://", url.strip(), flags=re.IGNORECASE)


def check_feed_url(url: str, *, allow_private: bool) -> None:
    """http/https only, read as the HTTP client reads it; refuse private hosts (SSRF)."""
    vetted_address(parse_target(url, NAME), allow_private=allow_private, label=NAME)


def download_deadline(snapshot: ConnectionSnapshot) -> Deadline:
    """The wall clock of one feed's (or CalDAV account's) requests, within its sync budget."""
    return Deadline(min(DOWNLOAD_SECONDS, time_left(snapshot, snapshot.provider)))


def fetch_feed(
    snapshot: ConnectionSnapshot, stored: dict[str, str] | None, now: datetime
) -> tuple[dict[str, str], bytes | None]:
    """GET the feed: the validators to store and the body (None: a 304, unchanged).

    ``stored`` holds the ETag / Last-Modified of a copy that may be reused, making the request
    conditional; None asks unconditionally.
    """
    headers = {"Accept": "text/calendar, */*;q=0.5"}
    if stored and stored.get("etag"):
        headers["If-None-Match"] = stored["etag"]
    if stored and stored.get("last_modified"):
        headers["If-Modified-Since"] = stored["last_modified"]
    deadline = download_deadline(snapshot)
    try:
        with _get(snapshot, headers, deadline) as answer:
            return _read(answer, stored, now, deadline, snapshot.config.ics_max_bytes)
    finally:
        deadline.cancel()


def _read(
    response: Answer,
    stored: dict[str, str] | None,
    now: datetime,
    deadline: Deadline,
    max_bytes: int,
) -> tuple[dict[str, str], bytes | None]:
    raise_for_transient(response, NAME, now)
    kept = stored or {}
    validators = {
        "etag": response.headers.get("ETag", kept.get("etag", "")),
        "last_modified": response.headers.get("Last-Modified", kept.get("last_modified", "")),
    }
    if response.status_code == 304 and stored is not None:
        return validators, None
    if response.status_code in _GONE:
        raise NeedsReauth(
            f"ics: the feed answered HTTP {response.status_code}; its address may have "
            "been reset — connect the new address"
        )
    if response.status_code != 200:
        raise ProviderError(f"ics: the feed answered HTTP {response.status_code}")
    return validators, bounded_body(response, deadline, max_bytes, label=NAME, what="the feed")


def _get(snapshot: ConnectionSnapshot, headers: dict[str, str], deadline: Deadline) -> Answer:
    """GET the feed, following redirects by hand."""
    answer, _url = untrusted_fetch.follow(
        snapshot.feed_url,
        lambda _url: headers,
        allow_private=snapshot.allow_private_network,
        deadline=deadline,
        timeout=snapshot.config.calendar_http_timeout_seconds,
        label=NAME,
    )
    return answer
