"""What a disconnected calendar leaves at its provider, recorded in the same
transaction as the delete for the minute job to undo: no web request calls a provider.
"""

from __future__ import annotations

from datetime import datetime

from calendars.models import CalendarConnection, Provider, ProviderRelease, ReleaseWork
from calendars.push.freshness import PUSH_PROVIDERS

TAKE_LIMIT = 200  # releases per minute job; more wait for the next
# What a release keeps of the connection: the fields it shares with ``ProviderRelease``.
RELEASED_FIELDS = [
    f.attname
    for f in ProviderRelease._meta.concrete_fields
    if f.attname not in ("id", "connection_id", "requested_at")
]


def request_release(connection: CalendarConnection, now: datetime) -> None:
    """Record what ``connection`` holds at its provider; in its owner's scope, before
    it is deleted. Nothing is recorded for a calendar that holds nothing there."""
    holds_grant = connection.provider == Provider.GOOGLE and connection.refresh_token_encrypted
    holds_channel = connection.provider in PUSH_PROVIDERS and connection.push_channel_id
    if not (holds_grant or holds_channel):
        return
    kept = {name: getattr(connection, name) for name in RELEASED_FIELDS}
    ProviderRelease.objects.update_or_create(
        connection_id=connection.pk, defaults={**kept, "requested_at": now}
    )
    ReleaseWork.objects.update_or_create(
        connection_id=connection.pk, defaults={"user_id": connection.user_id, "due_at": now}
    )
