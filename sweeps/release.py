"""The minute job's step that undoes disconnected calendars at their provider: stop the
push channel, revoke Google's grant (after: stopping needs it), delete the record. Best
effort, tried once, failures logged and counted."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured

from calendars.models import CalendarConnection, Provider, ProviderRelease, ReleaseWork
from calendars.push import channels
from calendars.release import take_due
from calendars.snapshot import snapshot_of
from core.config import NudgeConfig
from providers import crypto, google
from providers.base import ConnectionSnapshot
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars.release")


@dataclass
class ReleaseReport:
    released: int = 0  # records done with
    revoked: int = 0  # Google grants revoked
    failed: int = 0  # a channel or grant the provider did not confirm (logged)


def release_due(now: datetime, config: NudgeConfig) -> ReleaseReport:
    """Undo every recorded release that is due."""
    report = ReleaseReport()
    for connection_id, user_id in take_due(now):
        with tenant_scope(user_id):
            release = ProviderRelease.objects.filter(connection_id=connection_id).first()
            snapshot = _snapshot(release, config) if release is not None else None
        if release is not None and snapshot is not None:
            _undo(release, snapshot, now, config, report)
        elif release is not None:
            report.failed += 1
        with tenant_scope(user_id):
            ProviderRelease.objects.filter(connection_id=connection_id).delete()
        ReleaseWork.objects.filter(connection_id=connection_id).delete()
        report.released += 1
    return report


def _snapshot(release: ProviderRelease, config: NudgeConfig) -> ConnectionSnapshot | None:
    """The provider's view of the deleted connection, secrets decrypted (owner's scope)."""
    gone = CalendarConnection(
        pk=release.connection_id,
        user_id=release.user_id,
        provider=release.provider,
        account=release.account,
        access_token_encrypted=release.access_token_encrypted,
        refresh_token_encrypted=release.refresh_token_encrypted,
        token_expires_at=release.token_expires_at,
    )
    try:
        return snapshot_of(gone, config)
    except (crypto.SecretDecryptionError, ImproperlyConfigured):
        logger.warning("a disconnected calendar's tokens could not be read; nothing undone")
        return None


def _undo(
    release: ProviderRelease,
    snapshot: ConnectionSnapshot,
    now: datetime,
    config: NudgeConfig,
    report: ReleaseReport,
) -> None:
    if release.push_channel_id and not channels.stop(
        snapshot, release.push_channel_id, release.push_resource_id, now
    ):
        report.failed += 1
    if release.provider == Provider.GOOGLE and snapshot.refresh_token:
        if google.revoke_grant(snapshot.refresh_token, config.calendar_http_timeout_seconds):
            report.revoked += 1
        else:
            report.failed += 1
