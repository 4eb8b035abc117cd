"""Creating connections: an ICS feed address, or the tokens from an OAuth callback.

Kept out of the views and commands so both stay thin. The same rule as the
sync holds: no tenant scope is open during a network call.

A feed on a private or loopback address is refused unless explicitly allowed
(``connect_ics --allow-private``), and the choice is stored on the connection
and re-checked on every fetch and redirect. ``DEBUG`` deliberately does not
relax it: staging often runs with DEBUG on and still has an internal network
worth protecting from a user-supplied URL.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth import get_user_model
from django.utils import timezone

from calendars import crypto
from calendars.models import CalendarConnection, ConnectionStatus, Provider
from calendars.oauth import TokenGrant
from calendars.providers.base import ConnectionSnapshot, ProviderError
from calendars.providers.ics import IcsFeedProvider, check_feed_url, feed_host
from calendars.sync import apply_events, owner_facts
from core.config import NudgeConfig
from tenancy.scope import tenant_scope


class ConnectError(Exception):
    """The connection could not be made; the message is safe to show."""


def connect_ics_feed(
    user_id: int, url: str, *, allow_private: bool = False, now: datetime | None = None
) -> CalendarConnection:
    """Validate the address, fetch and parse the feed once, then store it encrypted."""
    if not get_user_model().objects.filter(pk=user_id).exists():
        raise ConnectError(f"no user with id {user_id}")
    now = now or timezone.now()
    window_start, window_end = NudgeConfig.from_settings().subject_window(now)
    with tenant_scope(user_id):
        zone, emails = owner_facts(user_id)
    snapshot = ConnectionSnapshot(
        connection_id=0,
        user_id=user_id,
        provider=Provider.ICS,
        calendar_id="",
        account="",
        sync_state={},
        full_sync=True,
        allow_private_network=allow_private,
        feed_url=url,
        owner_timezone=zone,
        owner_emails=emails,
    )
    try:
        check_feed_url(url, allow_private=allow_private)
        fetched = IcsFeedProvider().fetch(
            snapshot, now=now, window_start=window_start, window_end=window_end
        )
    except ProviderError as exc:
        raise ConnectError(crypto.scrub(str(exc), url)) from None
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.create(
            user_id=user_id,
            provider=Provider.ICS,
            account=(fetched.calendar_name or feed_host(url))[:255],
            calendar_id="",
            feed_url_encrypted=crypto.encrypt(url),
            allow_private_network=allow_private,
            sync_state=fetched.sync_state,
            last_synced_at=now,
        )
        apply_events(connection, fetched.events, now)
    return connection


def store_oauth_connection(
    user_id: int, provider: str, *, account: str, grant: TokenGrant
) -> CalendarConnection:
    """Create the user's connection for this account, or give an existing one new tokens.

    Reconnecting is how a ``needs_reauth`` connection is repaired, so it
    resets the status and asks for a full sync.
    """
    with tenant_scope(user_id):
        connection, _created = CalendarConnection.objects.get_or_create(
            user_id=user_id, provider=provider, account=account[:255]
        )
        connection.access_token_encrypted = crypto.encrypt(grant.access_token)
        if grant.refresh_token:
            connection.refresh_token_encrypted = crypto.encrypt(grant.refresh_token)
        connection.token_expires_at = grant.expires_at
        connection.status = ConnectionStatus.ACTIVE
        connection.last_error = ""
        connection.retry_after = None
        connection.resync_requested = True
        connection.save()
    return connection
