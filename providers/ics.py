"""ICS feed URLs: a conditional GET, recurrences expanded locally to ``EXPAND_AHEAD`` past
the window. While the stored expansion covers the window (in the reader's zone), a 304 or
a body hashing the same is "unchanged" (no parsing, no writes); otherwise it re-expands.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from providers.base import (
    CalendarProvider,
    ConnectionSnapshot,
    FetchResult,
    ProviderError,
    covers,
    time_left,
)
from providers.ics_fetch import NAME, fetch_feed
from providers.ics_parse import parse_feed_bounded, parse_seconds

EXPAND_AHEAD = timedelta(days=6)


class IcsFeedProvider(CalendarProvider):
    name = NAME

    def fetch(
        self,
        snapshot: ConnectionSnapshot,
        *,
        now: datetime,
        window_start: datetime,
        window_end: datetime,
    ) -> FetchResult:
        if not snapshot.feed_url:
            raise ProviderError("ics: no feed address stored")
        state = snapshot.sync_state
        covered = not snapshot.full_sync and covers_window(
            state, snapshot, window_start, window_end
        )
        stored = (
            {"etag": state.get("etag", ""), "last_modified": state.get("last_modified", "")}
            if covered
            else None
        )
        validators, body = fetch_feed(snapshot, stored, now)
        if body is None:
            return FetchResult(changed=False, sync_state={**state, **validators})
        digest = hashlib.sha256(body).hexdigest()
        if covered and digest == state.get("body_sha256"):
            return FetchResult(changed=False, sync_state={**state, **validators})
        horizon = window_end + EXPAND_AHEAD
        result = read_as_owner(body, snapshot, window_start, horizon)
        result.sync_state = {
            **validators,
            "body_sha256": digest,
            "expanded_from": window_start.isoformat(),
            "expanded_until": horizon.isoformat(),
            "zone": snapshot.owner_timezone,
        }
        return result


def covers_window(
    state: dict[str, Any], snapshot: ConnectionSnapshot, start: datetime, end: datetime
) -> bool:
    """Whether the stored copy was expanded over this whole window in the reader's zone."""
    return state.get("zone", "") == snapshot.owner_timezone and covers(
        state, start, end, ("expanded_from", "expanded_until")
    )


def read_as_owner(
    body: bytes, snapshot: ConnectionSnapshot, start: datetime, end: datetime
) -> FetchResult:
    """A calendar's occurrences in [start, end) as its owner means them (their zone,
    their addresses, the meeting hosts trusted), parsed in a bounded child."""
    return parse_feed_bounded(
        body,
        start=start,
        end=end,
        timezone=snapshot.owner_timezone,
        addresses=owner_addresses(snapshot),
        meeting_hosts=snapshot.config.meeting_hosts,
        seconds=min(parse_seconds(len(body)), time_left(snapshot, snapshot.provider)),
    )


def owner_addresses(snapshot: ConnectionSnapshot) -> tuple[str, ...]:
    """The addresses that are "me" in attendee lists: the account, if an address, and the user's."""
    return tuple(a for a in (snapshot.account, *snapshot.owner_emails) if "@" in a)
