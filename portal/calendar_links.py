"""The calendars page's actions beyond the OAuth views: list, find, switch and disconnect.

A calendar's switches (nudge its events at all; leave all-day events out) are
saved in the user's scope, then the user is re-materialized: rows of a calendar
switched off are withdrawn at once (materialize plans none for it), and a
claimed one is skipped at send time with the reason (``subjects.event_skip_reason``).

Disconnecting deletes the connection (its events and tokens go with it) in
the user's scope, stops its push channel (Google ``channels.stop``, Graph
``DELETE /subscriptions``), then revokes the refresh token at the provider where the
provider offers revocation — Google does (RFC 7009 endpoint); Microsoft's
identity platform has no per-token revocation for an app, so there the
tokens are only deleted. No scope is open during the network call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import requests
from django.conf import settings

from calendars.models import CalendarConnection, ConnectionStatus, Provider
from calendars.push.channels import push_channel_of, stop_push_channel
from core.config import NudgeConfig
from followups.actions import MAX_ID
from providers import crypto
from sweeps.replan import refresh_queue
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.portal")


def checking(connections: list[CalendarConnection]) -> set[int]:
    """The connections whose first fetch has not finished: "checking…" on the page
    (the minute job fetches them, ``calendars.push.worklist.request_fetch``)."""
    return {
        item.pk
        for item in connections
        if item.last_synced_at is None
        and item.status == ConnectionStatus.ACTIVE
        and item.provider == Provider.ICS
    }


def list_connections(user_id: int) -> list[CalendarConnection]:
    """Every calendar whose events the person may be nudged for, the local one (the
    demo's events) included: it can be switched off, though not disconnected."""
    with tenant_scope(user_id):
        return list(CalendarConnection.objects.filter(user_id=user_id).order_by("created_at"))


def set_switches(
    user_id: int, connection_id: int, *, nudges_on: bool, skip_all_day: bool, now: datetime
) -> CalendarConnection | None:
    """Save one calendar's two switches and re-plan; None if it is not the user's."""
    if not 0 < connection_id <= MAX_ID:
        return None
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.filter(user_id=user_id, pk=connection_id).first()
        if connection is None:
            return None
        connection.nudges_on, connection.skip_all_day = nudges_on, skip_all_day
        connection.save(update_fields=["nudges_on", "skip_all_day"])
    refresh_queue(user_id, now)
    return connection


def find(user_id: int, connection_id: int) -> CalendarConnection | None:
    """The user's connection of that id (not the internal local one), for the page
    that asks before disconnecting it."""
    if not 0 < connection_id <= MAX_ID:
        return None
    with tenant_scope(user_id):
        return (
            CalendarConnection.objects.filter(user_id=user_id, pk=connection_id)
            .exclude(provider=Provider.LOCAL)
            .first()
        )


@dataclass(frozen=True)
class Disconnected:
    label: str
    revoked: bool
    note: str


def revoke_google(refresh_token: str, timeout: float) -> bool:
    """Ask Google to revoke the grant; True when it did (or it was already gone)."""
    try:
        response = requests.post(
            settings.GOOGLE_REVOKE_URL,
            data={"token": refresh_token},
            timeout=timeout,
        )
    except requests.RequestException as exc:
        logger.warning("Google token revocation failed", extra={"error": type(exc).__name__})
        return False
    # 400 invalid_token: already revoked or expired; nothing left to revoke.
    return response.status_code in (200, 400)


def disconnect(
    user_id: int, connection_id: int, now: datetime, config: NudgeConfig
) -> Disconnected | None:
    """Delete the user's connection and revoke where possible; None if it is not theirs."""
    if not 0 < connection_id <= MAX_ID:
        return None
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.filter(user_id=user_id, pk=connection_id).first()
        if connection is None or connection.provider == Provider.LOCAL:
            return None
        label = str(connection)
        provider = connection.provider
        refresh_token = ""
        if provider == Provider.GOOGLE and connection.refresh_token_encrypted:
            try:
                refresh_token = crypto.decrypt(connection.refresh_token_encrypted)
            except Exception:
                logger.warning("a stored Google token could not be decrypted for revocation")
        push_channel = push_channel_of(connection, config)
        connection.delete()
    refresh_queue(user_id, now)
    # Stop the push channel before revoking: stopping needs the grant.
    stop_push_channel(connection_id, push_channel, now)
    if provider == Provider.GOOGLE:
        revoked = bool(refresh_token) and revoke_google(
            refresh_token, config.calendar_http_timeout_seconds
        )
        note = "access revoked at Google" if revoked else "Google did not confirm revocation"
        return Disconnected(label, revoked, note)
    if provider == Provider.MICROSOFT:
        return Disconnected(label, False, "tokens deleted (Microsoft offers no revocation)")
    return Disconnected(label, False, "feed address deleted")
