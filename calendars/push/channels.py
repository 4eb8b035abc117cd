"""Creating, renewing and stopping a connection's push channel, :data:`RENEW_BEFORE` its
expiry. Google renews by a new channel, then stops the old; Graph PATCHes, or subscribes
again when the subscription is gone. A Graph subscription taken early (a lifecycle
notification) is first checked with a GET, so a replay costs one GET and changes nothing.
No tenant scope is open during a provider call. A channel that cannot be made leaves the
connection polled, retried in an hour; one not renewed but unexpired stays live.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta

from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from calendars.models import CalendarConnection, ConnectionStatus, Provider, PushState
from calendars.push import worklist
from calendars.push.freshness import PUSH_PROVIDERS, push_live
from calendars.snapshot import snapshot_of, token_values
from core.bearer import digest
from core.config import NudgeConfig
from providers import crypto, google, microsoft
from providers.base import ConnectionSnapshot, ProviderError
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars.push")

RENEW_BEFORE = timedelta(hours=12)
RETRY_RENEWAL_AFTER = timedelta(minutes=15)
RETRY_CREATION_AFTER = timedelta(hours=1)
REMOVED = "Graph removed the subscription"


class Outcome:
    CREATED = "created"
    RENEWED = "renewed"
    KEPT = "kept"  # live and not due
    FAILED = "failed"
    DISABLED = "disabled"  # push not configured, or the connection cannot have it
    GONE = "gone"


def endpoint(config: NudgeConfig, name: str) -> str:
    """The public address of one of our push endpoints (``calendars:<name>``)."""
    return config.calendar_push_base_url.rstrip("/") + reverse(f"calendars:{name}")


def maintain(user_id: int, connection_id: int, now: datetime, config: NudgeConfig) -> str:
    """Create or renew the connection's channel when due; records the outcome on both tables."""
    if not config.calendar_push_base_url:
        return Outcome.DISABLED
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.filter(pk=connection_id).first()
        if connection is None or connection.provider not in PUSH_PROVIDERS:
            worklist.forget(connection_id)
            return Outcome.GONE
        if connection.status == ConnectionStatus.NEEDS_REAUTH:  # reconnecting enrolls it again
            worklist.schedule(connection_id, None, polling=True)
            return Outcome.DISABLED
        live = push_live(connection, now, config)
        held_expiry = connection.push_expires_at
        # A reauthorisation Graph asked for (noted by ``notifications`` about the expiry
        # held) stays noted only until the renewal answering it clears it.
        due = (
            not live
            or held_expiry - now <= RENEW_BEFORE
            or connection.push_reauthorize_expiry is not None
        )
        if not due and connection.provider == Provider.GOOGLE:
            worklist.schedule(connection_id, held_expiry - RENEW_BEFORE, polling=False)
            return Outcome.KEPT
        old_channel, old_resource = connection.push_channel_id, connection.push_resource_id
        try:
            snapshot = snapshot_of(connection, config)
        except (crypto.SecretDecryptionError, ImproperlyConfigured) as exc:
            return _failed(user_id, connection_id, live, now, exc)

    lapsed = False
    if not due:  # Graph, taken early (a lifecycle notification): ask Graph what is true
        try:
            found = microsoft.get_subscription(snapshot, old_channel, now)
        except ProviderError as exc:
            return _failed(user_id, connection_id, live, now, exc, snapshot)
        if tokens := token_values(snapshot):  # kept at once: Graph rotates refresh tokens
            _update(user_id, connection_id, **tokens)
        if found is None:
            # Polled, visibly, and fetched at once (changes since it went were not notified).
            _update(
                user_id,
                connection_id,
                push_state=PushState.LAPSED,
                push_error=REMOVED,
                resync_requested=True,
            )
            worklist.mark_changed(connection_id, now)
            logger.info("push subscription of connection %s is gone at Graph", connection_id)
            live, lapsed, old_channel = False, True, ""
        elif found[1] - now > RENEW_BEFORE:
            worklist.schedule(connection_id, found[1] - RENEW_BEFORE, polling=False)
            return Outcome.KEPT
        # else Graph's expiry is nearer than ours: renew now.

    # Echoed on every notification (Google's token, Graph's clientState); only its
    # digest is stored.
    secret = secrets.token_urlsafe(32)
    # Both name the owner, so a notification is checked inside the owner's tenant scope
    # (``notifications.GOOGLE_CHANNEL``, ``GRAPH_CLIENT_STATE``); Graph's secret proves it is Graph.
    channel_id = f"nudge-{user_id}-{connection_id}-{secrets.token_urlsafe(12)}"
    # Committed before the provider is asked: its first notifications may arrive before
    # its answer (Google's, or Graph's right after subscribing), and are believed on this.
    _update(
        user_id,
        connection_id,
        push_pending_channel_id=channel_id if connection.provider == Provider.GOOGLE else "",
        push_pending_digest=digest(secret),
    )
    resource_id = ""
    outcome = Outcome.RENEWED if old_channel else Outcome.CREATED
    try:
        if connection.provider == Provider.GOOGLE:
            resource_id, expires_at = google.watch(
                snapshot,
                channel_id=channel_id,
                token=secret,
                address=endpoint(config, "google_push"),
                now=now,
            )
        elif renewed := old_channel and microsoft.get_subscription(
            snapshot, old_channel, now, renew=True
        ):
            channel_id, expires_at = renewed
        else:  # Graph no longer has it, or never had: a new subscription
            outcome = Outcome.CREATED
            channel_id, expires_at = microsoft.subscribe(
                snapshot,
                notification_url=endpoint(config, "microsoft_push"),
                lifecycle_url=endpoint(config, "microsoft_lifecycle"),
                client_state=f"{user_id}.{secret}",
                now=now,
            )
    except ProviderError as exc:
        return _failed(user_id, connection_id, live, now, exc, snapshot, lapsed=lapsed)

    with tenant_scope(user_id):
        row = CalendarConnection.objects.filter(pk=connection_id)
        stored_channel = row.select_for_update().values_list("push_channel_id", flat=True).first()
        gone = stored_channel is None
        if not gone:
            changes = {
                "push_state": PushState.LIVE,
                "push_expires_at": expires_at,
                "push_error": "",
                "push_reauthorize_expiry": None,  # answered by this renewal
                "push_pending_channel_id": "",
                "push_pending_digest": "",
                **token_values(snapshot),
            }
            if channel_id != stored_channel:  # a new channel numbers from 1
                changes |= {
                    "push_message_number": 0,
                    "push_channel_id": channel_id,
                    "push_resource_id": resource_id,
                }
            # A renewed Graph subscription keeps the clientState it was created with.
            if connection.provider == Provider.GOOGLE or outcome != Outcome.RENEWED:
                changes["push_secret_digest"] = digest(secret)
            row.update(**changes)
    if gone:  # disconnected while we were creating it: do not leave it running
        stop(snapshot, channel_id, resource_id, now)
        worklist.forget(connection_id)
        return Outcome.GONE
    if connection.provider == Provider.GOOGLE and old_channel and old_channel != channel_id:
        stop(snapshot, old_channel, old_resource, now)
    worklist.schedule(connection_id, expires_at - RENEW_BEFORE, polling=False)
    logger.info("push channel %s for connection %s until %s", outcome, connection_id, expires_at)
    return outcome


def _update(user_id: int, connection_id: int, **changes: object) -> None:
    with tenant_scope(user_id):
        CalendarConnection.objects.filter(pk=connection_id).update(**changes)


def _failed(
    user_id: int,
    connection_id: int,
    live: bool,
    now: datetime,
    error: Exception,
    snapshot: ConnectionSnapshot | None = None,
    *,
    lapsed: bool = False,
) -> str:
    """Still-live channels are retried soon; otherwise the connection is polled, visibly
    (``lapsed`` when Graph removed the subscription and a new one could not be made).
    Tokens the provider call refreshed are kept, and its secrets scrubbed."""
    message = str(error)
    if snapshot is not None:
        message = crypto.scrub(message, *snapshot.secrets())
    if lapsed:
        message = f"{REMOVED}; a new one failed: {message}"
    changes = {
        "push_error": message[:255],
        "push_pending_channel_id": "",
        "push_pending_digest": "",
        **token_values(snapshot),
    }
    if not live:
        changes["push_state"] = PushState.LAPSED if lapsed else PushState.FAILED
    _update(user_id, connection_id, **changes)
    retry = RETRY_RENEWAL_AFTER if live else RETRY_CREATION_AFTER
    worklist.schedule(connection_id, now + retry, polling=not live)
    logger.warning("push channel for connection %s failed: %s", connection_id, message)
    return Outcome.FAILED


def stop(snapshot: ConnectionSnapshot, channel_id: str, resource_id: str, now: datetime) -> bool:
    """Stop a channel (Google) or delete a subscription (Graph); best effort, never raises."""
    try:
        if snapshot.provider == Provider.GOOGLE:
            return google.stop_channel(
                snapshot, channel_id=channel_id, resource_id=resource_id, now=now
            )
        return microsoft.delete_subscription(snapshot, channel_id, now)
    except ProviderError as exc:
        logger.warning(
            "stopping push channel for connection %s failed: %s",
            snapshot.connection_id,
            crypto.scrub(str(exc), *snapshot.secrets()),
        )
        return False
