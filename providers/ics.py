"""ICS feed URLs: conditional GET, recurrences expanded locally, one provider.

A feed has no query API, so each parse expands occurrences over the window
(from its start to ``EXPAND_AHEAD`` past its end) and records both ends and
the reader's zone. While that still covers the window, runs send
``If-None-Match`` / ``If-Modified-Since``; a 304 costs no parsing and no
writes. When the window outruns the expansion (every few days), or a replay
asks for an earlier window, or the reader's zone changed, the run fetches
unconditionally and re-expands. A 200 whose body hashes the same as last time
is also "unchanged".

The two halves live apart: ``ics_fetch`` (the address, the bounded download)
and ``ics_parse`` (repairs, zones, reminders, the bounded expansion in a child
process). The whole sync of one connection has ``CALENDAR_SYNC_BUDGET_SECONDS``.
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
        covered = not snapshot.full_sync and _covers(state, snapshot, window_start, window_end)
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
        result = parse_feed_bounded(
            body,
            start=window_start,
            end=horizon,
            timezone=snapshot.owner_timezone,
            addresses=owner_addresses(snapshot),
            meeting_hosts=snapshot.config.meeting_hosts,
            seconds=min(parse_seconds(len(body)), time_left(snapshot, NAME)),
        )
        result.sync_state = {
            **validators,
            "body_sha256": digest,
            "expanded_from": window_start.isoformat(),
            "expanded_until": horizon.isoformat(),
            "zone": snapshot.owner_timezone,
        }
        return result


def _covers(
    state: dict[str, Any], snapshot: ConnectionSnapshot, start: datetime, end: datetime
) -> bool:
    """Whether the stored copy was expanded over this whole window, for this reader.

    Both ends count: a replay (``--now`` earlier than the last run) must expand
    again rather than reuse occurrences that begin after its window opened.
    The reader's zone counts too: it decides what floating times mean.
    """
    expanded_from = _parse_state_time(state.get("expanded_from"))
    expanded_until = _parse_state_time(state.get("expanded_until"))
    return (
        expanded_from is not None
        and expanded_until is not None
        and expanded_from <= start
        and expanded_until >= end
        and state.get("zone", "") == snapshot.owner_timezone
    )


def owner_addresses(snapshot: ConnectionSnapshot) -> tuple[str, ...]:
    """The addresses that are "me" in this feed's attendee lists: the connection's
    account when it is an address (Google names a feed by it) and the user's e-mail
    (Outlook and iCloud feeds carry neither name nor owner)."""
    return tuple(a for a in (snapshot.account, *snapshot.owner_emails) if "@" in a)


def _parse_state_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
