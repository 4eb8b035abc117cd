"""The calendars page's two actions beyond the OAuth views: list and disconnect.

Disconnecting deletes the connection (its events and tokens go with it) in
the user's scope, then revokes the refresh token at the provider where the
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

from calendars import crypto
from calendars.models import CalendarConnection, Provider
from core.config import NudgeConfig
from portal.followups import MAX_ID
from scheduled_sends.materialize import refresh_queue
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.portal")


def list_connections(user_id: int) -> list[CalendarConnection]:
    with tenant_scope(user_id):
        return list(
            CalendarConnection.objects.filter(user_id=user_id)
            .exclude(provider=Provider.LOCAL)
            .order_by("created_at")
        )


@dataclass(frozen=True)
class Disconnected:
    label: str
    revoked: bool
    note: str


def revoke_google(refresh_token: str) -> bool:
    """Ask Google to revoke the grant; True when it did (or it was already gone)."""
    try:
        response = requests.post(
            settings.GOOGLE_REVOKE_URL,
            data={"token": refresh_token},
            timeout=NudgeConfig.from_settings().calendar_http_timeout_seconds,
        )
    except requests.RequestException as exc:
        logger.warning("Google token revocation failed", extra={"error": type(exc).__name__})
        return False
    # 400 invalid_token: already revoked or expired; nothing left to revoke.
    return response.status_code in (200, 400)


def disconnect(user_id: int, connection_id: int, now: datetime) -> Disconnected | None:
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
        connection.delete()
    refresh_queue(user_id, now)
    if provider == Provider.GOOGLE:
        revoked = bool(refresh_token) and revoke_google(refresh_token)
        note = "access revoked at Google" if revoked else "Google did not confirm revocation"
        return Disconnected(label, revoked, note)
    if provider == Provider.MICROSOFT:
        return Disconnected(label, False, "tokens deleted (Microsoft offers no revocation)")
    return Disconnected(label, False, "feed address deleted")
