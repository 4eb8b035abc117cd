"""Whether a connection must be fetched now, or its stored copy will do.

The one place that decides it: called only from ``calendars.sync.fetch_decision``,
which every read of a connection goes through — the sweep's ``SyncPool`` (by
way of ``read_user_connections``), which the minute job uses too.
Without live push every cycle fetches, as before: ICS keeps its conditional
GET (a 304 costs nothing), and Google and Graph re-query the window. With live
push the provider tells us when something changed, so a Google or Graph
calendar is fetched only when

* it was notified (``resync_requested``, set by a verified notification or
  by support's "resync now"),
* its stored window no longer covers the sweep's (the look-ahead moved past
  it, or a replay asks for an earlier instant),
* the safety poll is due (``CALENDAR_SAFETY_POLL_MINUTES`` since the last
  fetch): a notification lost on the way costs at most that long,
* or it is not healthy (never synced, failing, or in need of reauthorisation
  — the last is skipped by sync before this is asked).

A connection with live push is fetched over a window widened by the safety
poll, so the stored copy covers the look-ahead until the next safety poll
and the two triggers coincide.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from calendars.models import CalendarConnection, ConnectionStatus, Provider, PushState
from core.config import NudgeConfig

PUSH_PROVIDERS = (Provider.GOOGLE, Provider.MICROSOFT)


def _covers(state: dict[str, Any], start: datetime, end: datetime) -> bool:
    try:
        stored_start = datetime.fromisoformat(state["window_start"])
        stored_end = datetime.fromisoformat(state["window_end"])
    except (KeyError, TypeError, ValueError):
        return False
    return stored_start <= start and stored_end >= end


def push_live(connection: CalendarConnection, now: datetime, config: NudgeConfig) -> bool:
    """Whether the provider is telling us about this connection's changes right now."""
    return (
        bool(config.calendar_push_base_url)
        and connection.provider in PUSH_PROVIDERS
        and connection.push_state == PushState.LIVE
        and connection.push_expires_at is not None
        and connection.push_expires_at > now
    )


def fetch_window(
    connection: CalendarConnection,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
    config: NudgeConfig,
) -> tuple[datetime, datetime] | None:
    """The window to fetch ``connection`` over now, or None when its stored copy will do."""
    if not push_live(connection, now, config):
        return window_start, window_end
    widened = (window_start, window_end + config.calendar_safety_poll)
    if (
        connection.resync_requested
        or connection.status != ConnectionStatus.ACTIVE
        or connection.last_synced_at is None
        or now - connection.last_synced_at >= config.calendar_safety_poll
        or not _covers(connection.sync_state or {}, window_start, window_end)
    ):
        return widened
    return None
