"""What a fetch is given about a connection (its secrets decrypted, its owner's zone
and addresses), and the tokens a fetch refreshed, encrypted again for storing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from calendars.models import CalendarConnection
from core.config import NudgeConfig
from providers import crypto
from providers.base import ConnectionSnapshot

if TYPE_CHECKING:
    from calendars.sync import ConnectionRow


def token_values(snapshot: ConnectionSnapshot | None) -> dict[str, object]:
    """Refreshed (for Microsoft, rotated) tokens, encrypted, by column name; empty when
    the provider call left them as they were."""
    if snapshot is None or not snapshot.credentials_changed:
        return {}
    return {
        "access_token_encrypted": crypto.encrypt(snapshot.access_token),
        "refresh_token_encrypted": crypto.encrypt(snapshot.refresh_token),
        "token_expires_at": snapshot.token_expires_at,
    }


def snapshot_of(
    connection: CalendarConnection | ConnectionRow,
    config: NudgeConfig,
    facts: tuple[str, tuple[str, ...]] | None = None,
) -> ConnectionSnapshot:
    """What the provider needs, secrets decrypted; read inside the tenant scope
    (``facts``: the owner's zone and addresses, when already read)."""
    if facts is None:
        owner = get_user_model().objects.filter(pk=connection.user_id)
        row = owner.values_list("delivery_settings__timezone", "email").first()
        zone, email = row if row is not None else ("", "")
        facts = (zone or "", tuple(filter(None, [email])))
    zone, emails = facts
    return ConnectionSnapshot(
        connection_id=connection.id,
        user_id=connection.user_id,
        provider=connection.provider,
        calendar_id=connection.calendar_id,
        account=connection.account,
        sync_state=dict(connection.sync_state or {}),
        full_sync=connection.resync_requested,
        config=config,
        allow_private_network=connection.allow_private_network,
        access_token=crypto.decrypt(connection.access_token_encrypted),
        refresh_token=crypto.decrypt(connection.refresh_token_encrypted),
        token_expires_at=connection.token_expires_at,
        feed_url=crypto.decrypt(connection.feed_url_encrypted),
        owner_timezone=zone,
        owner_emails=emails,
    )


def rotated_meanwhile(stored_ciphertext: str, refresh_token_at_read: str) -> bool:
    """Whether the stored refresh token is no longer the one the fetch was given."""
    try:
        return crypto.decrypt(stored_ciphertext) != refresh_token_at_read
    except (crypto.SecretDecryptionError, ImproperlyConfigured):
        return False
