"""Whether a connection must be fetched now, or its stored copy will do. Without live
push every cycle fetches; with it, only when notified, uncovered, unhealthy or due the
safety poll (``CALENDAR_SAFETY_POLL_MINUTES``), over a window widened by that poll.
"""

from __future__ import annotations

from datetime import datetime

from calendars.models import CalendarConnection, ConnectionStatus, Provider, PushState
from core.config import NudgeConfig
from providers.base import covers

# Where ``providers.oauth.window_events`` stores a fetch's window.
WINDOW_KEYS = ("window_start", "window_end")

PUSH_PROVIDERS = (Provider.GOOGLE, Provider.MICROSOFT)


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
        or not covers(connection.sync_state or {}, window_start, window_end, WINDOW_KEYS)
    ):
        return widened
    return None
