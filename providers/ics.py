"""ICS feed URLs: a conditional GET, recurrences expanded locally to ``EXPAND_AHEAD`` past
the window. While the stored expansion covers the window (in the reader's zone), a 304 or
a body hashing the same is "unchanged" (no parsing, no writes); otherwise it re-expands.

The feed's address is a secret (it grants read access to the calendar), so it is only ever
shown as its host. It is fetched through ``untrusted_fetch``, the download cut at
``DOWNLOAD_SECONDS`` and the body at ``ICS_MAX_BYTES`` after decompression.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

import urllib3
from urllib3.exceptions import LocationParseError

from providers import untrusted_fetch
from providers.base import (
    ConnectionSnapshot,
    FetchResult,
    NeedsReauth,
    ProviderError,
    covers,
    raise_for_transient,
    time_left,
)
from providers.parse_template import parse_feed_bounded
from providers.untrusted_fetch import Deadline, bounded_body, parse_target, vetted_address

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
    return Deadline(min(DOWNLOAD_SECONDS, time_left(snapshot)))


def fetch_feed(
    snapshot: ConnectionSnapshot, conditional: bool, now: datetime
) -> tuple[dict[str, str], bytes | None]:
    """GET the feed: the validators to store and the body (None: a 304, unchanged).
    ``conditional``: the stored copy may be reused, so its ETag / Last-Modified are sent."""
    kept = snapshot.sync_state if conditional else {}
    headers = {"Accept": "text/calendar, */*;q=0.5"}
    if kept.get("etag"):
        headers["If-None-Match"] = kept["etag"]
    if kept.get("last_modified"):
        headers["If-Modified-Since"] = kept["last_modified"]
    deadline = download_deadline(snapshot)
    try:
        with untrusted_fetch.follow(
            snapshot.feed_url,
            lambda _url: headers,
            allow_private=snapshot.allow_private_network,
            deadline=deadline,
            timeout=snapshot.config.calendar_http_timeout_seconds,
            label=NAME,
        ) as (answer, _url):
            status = answer.status
            raise_for_transient(status, answer.headers, NAME, now)
            validators = {
                "etag": answer.headers.get("ETag", kept.get("etag", "")),
                "last_modified": answer.headers.get("Last-Modified", kept.get("last_modified", "")),
            }
            if status == 304 and conditional:
                return validators, None
            if status in _GONE:
                raise NeedsReauth(
                    f"ics: the feed answered HTTP {status}; its address may have "
                    "been reset — connect the new address"
                )
            if status != 200:
                raise ProviderError(f"ics: the feed answered HTTP {status}")
            max_bytes = snapshot.config.ics_max_bytes
            body = bounded_body(answer, deadline, max_bytes, label=NAME, what="the feed")
            return validators, body
    finally:
        deadline.cancel()


EXPAND_AHEAD = timedelta(days=6)


def fetch(
    snapshot: ConnectionSnapshot,
    *,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
) -> FetchResult:
    if not snapshot.feed_url:
        raise ProviderError("ics: no feed address stored")
    state = snapshot.sync_state
    covered = reusable(snapshot, window_start, window_end)
    validators, body = fetch_feed(snapshot, covered, now)
    if body is None:
        return FetchResult(changed=False, sync_state={**state, **validators})
    digest = hashlib.sha256(body).hexdigest()
    if covered and digest == state.get("body_sha256"):
        return FetchResult(changed=False, sync_state={**state, **validators})
    result = read_as_owner(body, snapshot, window_start, window_end)
    result.sync_state |= {**validators, "body_sha256": digest}
    return result


def reusable(snapshot: ConnectionSnapshot, start: datetime, end: datetime) -> bool:
    """Whether the stored copy may be reused: no full sync asked, and it was expanded over
    this whole window in the reader's zone."""
    state = snapshot.sync_state
    return (
        not snapshot.full_sync
        and state.get("zone", "") == snapshot.owner_timezone
        and covers(state, start, end, ("expanded_from", "expanded_until"))
    )


def read_as_owner(
    body: bytes | list[str],
    snapshot: ConnectionSnapshot,
    window_start: datetime,
    window_end: datetime,
) -> FetchResult:
    """A feed's (or CalDAV objects') occurrences from the window's start to ``EXPAND_AHEAD``
    past its end, as its owner means them (their zone, their addresses, the meeting hosts
    trusted), parsed in a bounded child; ``sync_state`` holds what the expansion covers
    (``reusable``)."""
    horizon = window_end + EXPAND_AHEAD
    result = parse_feed_bounded(
        body,
        start=window_start,
        end=horizon,
        timezone=snapshot.owner_timezone,
        # "Me" in attendee lists: the account, if an address, and the user's addresses.
        addresses=tuple(a for a in (snapshot.account, *snapshot.owner_emails) if "@" in a),
        meeting_hosts=snapshot.config.meeting_hosts,
        seconds=time_left(snapshot),
    )
    result.sync_state = {
        "expanded_from": window_start.isoformat(),
        "expanded_until": horizon.isoformat(),
        "zone": snapshot.owner_timezone,
    }
    return result
