"""Sync each connected calendar into local rows, once per materialize run.

Called by the materialize sweep for one user before it reads that user's
events, so a provider call per connection per run is the ceiling (plus a token
refresh when one is due, and extra pages only for a calendar with more events
in a day than a page holds).

Each connection goes read → HTTP → write: its row is read and its secrets
decrypted inside the owner's ``tenant_scope``, the scope is closed, the
provider is called, and a new scope writes the outcome. A scope is never open
across a network call (a slow provider must not hold a transaction), and one
connection's failure is recorded on that connection and never raised.

Outcomes: success replaces the connection's local copy with exactly what the
provider returned (rows keyed by (connection, provider_event_id,
occurrence_start) are updated in place so their ids — which queued nudges
reference — stay stable; rows no longer returned are deleted). ``invalid_grant``
→ ``needs_reauth`` (no calendar nudges until the user reconnects); 429/5xx →
``retry_after`` (honouring Retry-After) and the previous copy stays; a
malformed answer → ``last_error`` and the previous copy stays. A success that
had to skip unusable events says so in ``last_error`` with the status active.
Each connection's provider call has ``CALENDAR_SYNC_BUDGET_SECONDS``; past it
the sync is abandoned like a 5xx (``retry_after`` an hour on), and the sweep
goes on with the stored copy.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.utils import timezone

from accounts.models import DeliverySettings
from calendars import crypto
from calendars.models import CalendarConnection, CalendarEvent, ConnectionStatus, Provider
from calendars.providers import get_provider
from calendars.providers.base import (
    ConnectionSnapshot,
    FetchResult,
    NeedsReauth,
    ProviderError,
    ProviderEvent,
    RetryLater,
    call_count,
)
from core.config import NudgeConfig
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars.sync")

DEFAULT_BACKOFF = timedelta(minutes=5)
MAX_BACKOFF = timedelta(hours=24)
MAX_ERROR_LENGTH = 1000
EVENT_FIELDS = (
    "title",
    "starts_at",
    "ends_at",
    "all_day",
    "status",
    "declined",
    "reminder_minutes",
)


class Outcome:
    SYNCED = "synced"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    NEEDS_REAUTH = "needs_reauth"  # found revoked in this run
    SKIPPED_REAUTH = "skipped_needs_reauth"  # already waiting for the user; not contacted
    BACKING_OFF = "backing_off"  # inside retry_after; not contacted
    DEFERRED = "deferred"  # the user's sync budget was spent; synced next run
    GONE = "gone"  # deleted while we were fetching


@dataclass
class ConnectionResult:
    connection_id: int
    provider: str
    outcome: str
    message: str = ""
    provider_calls: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    skipped_events: int = 0


@dataclass
class SyncSummary:
    connections: int = 0
    synced: int = 0
    unchanged: int = 0
    failed: int = 0
    needs_reauth: int = 0
    provider_calls: int = 0
    errors: list[str] = field(default_factory=list)
    backing_off: int = 0
    deferred: int = 0
    events_created: int = 0
    events_updated: int = 0
    events_deleted: int = 0
    events_skipped: int = 0
    results: list[ConnectionResult] = field(default_factory=list)

    def add(self, result: ConnectionResult) -> None:
        self.results.append(result)
        self.provider_calls += result.provider_calls
        self.events_created += result.created
        self.events_updated += result.updated
        self.events_deleted += result.deleted
        self.events_skipped += result.skipped_events
        if result.outcome == Outcome.SYNCED:
            self.synced += 1
        elif result.outcome == Outcome.UNCHANGED:
            self.unchanged += 1
        elif result.outcome in (Outcome.NEEDS_REAUTH, Outcome.SKIPPED_REAUTH):
            self.needs_reauth += 1
        elif result.outcome == Outcome.BACKING_OFF:
            self.backing_off += 1
        elif result.outcome == Outcome.DEFERRED:
            self.deferred += 1
        elif result.outcome == Outcome.FAILED:
            self.failed += 1
        if result.outcome in (Outcome.FAILED, Outcome.NEEDS_REAUTH):
            self.errors.append(
                f"connection {result.connection_id} ({result.provider}): {result.message}"
            )


def sync_user_connections(
    user_id: int, *, now: datetime, window_start: datetime, window_end: datetime
) -> SyncSummary:
    """Sync every connection of ``user_id`` over the window; never raises per connection.

    The user's connections share ``CALENDAR_SYNC_USER_BUDGET_SECONDS``: once
    it is spent, the rest keep their stored copy this run (``deferred``) and
    go first next run (least recently synced first), so one tenant with many
    slow calendars cannot hold the sweep, and none of theirs starves.
    """
    with tenant_scope(user_id):
        connection_ids = list(
            CalendarConnection.objects.filter(user_id=user_id)
            .exclude(provider=Provider.LOCAL)
            .order_by(F("last_synced_at").asc(nulls_first=True), "pk")
            .values_list("pk", flat=True)
        )
    summary = SyncSummary(connections=len(connection_ids))
    deadline = time.monotonic() + NudgeConfig.from_settings().calendar_sync_user_budget_seconds
    for connection_id in connection_ids:
        if time.monotonic() >= deadline:
            summary.add(
                ConnectionResult(
                    connection_id,
                    "?",
                    Outcome.DEFERRED,
                    "the user's calendar sync budget was spent; synced next run",
                )
            )
            continue
        try:
            result = sync_connection(
                user_id, connection_id, now=now, window_start=window_start, window_end=window_end
            )
        except Exception as exc:  # e.g. the database failing mid-write: count it, go on
            logger.exception("calendar sync failed for connection %s", connection_id)
            result = ConnectionResult(
                connection_id, "?", Outcome.FAILED, f"internal error ({type(exc).__name__})"
            )
        summary.add(result)
    return summary


def sync_connection(
    user_id: int,
    connection_id: int,
    *,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
) -> ConnectionResult:
    """One connection: read its row, call its provider (no scope open), write the outcome."""
    calls_before = call_count()
    snapshot: ConnectionSnapshot | None = None
    error: ProviderError | None = None
    fetched: FetchResult | None = None
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.filter(pk=connection_id).first()
        if connection is None:
            return ConnectionResult(connection_id, "?", Outcome.GONE)
        provider_name = connection.provider
        if connection.status == ConnectionStatus.NEEDS_REAUTH:
            return ConnectionResult(connection_id, provider_name, Outcome.SKIPPED_REAUTH)
        if connection.retry_after and connection.retry_after > now:
            message = f"backing off until {connection.retry_after:%Y-%m-%d %H:%M}Z"
            return ConnectionResult(connection_id, provider_name, Outcome.BACKING_OFF, message)
        try:
            snapshot = snapshot_of(connection)
        except (crypto.SecretDecryptionError, ImproperlyConfigured) as exc:
            error = ProviderError(str(exc))

    refresh_token_at_read = snapshot.refresh_token if snapshot else ""
    if snapshot is not None:
        snapshot.deadline = (
            time.monotonic() + NudgeConfig.from_settings().calendar_sync_budget_seconds
        )
        try:
            fetched = get_provider(provider_name).fetch(
                snapshot, now=now, window_start=window_start, window_end=window_end
            )
        except ProviderError as exc:
            error = exc
        except Exception as exc:  # a bug in one provider must not stop the sweep
            error = ProviderError(f"{provider_name}: internal error ({type(exc).__name__})")
            logger.error(
                "calendar sync crashed for connection %s: %s",
                connection_id,
                crypto.scrub("".join(traceback.format_exception(exc)), *snapshot.secrets()),
            )

    secrets = snapshot.secrets() if snapshot else ()
    result = ConnectionResult(connection_id, provider_name, Outcome.FAILED)
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.select_for_update().filter(pk=connection_id).first()
        if connection is None:
            result.outcome = Outcome.GONE
        else:
            if isinstance(error, NeedsReauth) and _rotated_meanwhile(
                connection, refresh_token_at_read
            ):
                # A concurrent sync spent and replaced the refresh token we sent
                # (Microsoft rotates them): our invalid_grant says nothing about consent.
                error = RetryLater(f"{provider_name}: refresh token was rotated by another sync")
            if snapshot is not None and snapshot.credentials_changed:
                store_tokens(connection, snapshot)
            if error is not None:
                _record_failure(connection, error, now, secrets, result)
            elif fetched is not None and snapshot is not None:
                _record_success(connection, snapshot, fetched, now, result)
    result.provider_calls = call_count() - calls_before
    _log_result(result)
    return result


def owner_facts(user_id: int) -> tuple[str, tuple[str, ...]]:
    """The user's time zone and e-mail addresses; read inside their tenant scope."""
    zone = (
        DeliverySettings.objects.filter(user_id=user_id).values_list("timezone", flat=True).first()
    )
    email = get_user_model().objects.filter(pk=user_id).values_list("email", flat=True).first()
    return zone or "", tuple(filter(None, [email]))


def snapshot_of(connection: CalendarConnection) -> ConnectionSnapshot:
    """What the provider needs, secrets decrypted; read inside the tenant scope."""
    zone, emails = owner_facts(connection.user_id)
    return ConnectionSnapshot(
        connection_id=connection.pk,
        user_id=connection.user_id,
        provider=connection.provider,
        calendar_id=connection.calendar_id,
        account=connection.account,
        sync_state=dict(connection.sync_state or {}),
        full_sync=connection.resync_requested,
        allow_private_network=connection.allow_private_network,
        access_token=crypto.decrypt(connection.access_token_encrypted),
        refresh_token=crypto.decrypt(connection.refresh_token_encrypted),
        token_expires_at=connection.token_expires_at,
        feed_url=crypto.decrypt(connection.feed_url_encrypted),
        owner_timezone=zone,
        owner_emails=emails,
    )


def _rotated_meanwhile(connection: CalendarConnection, refresh_token_at_read: str) -> bool:
    if not refresh_token_at_read:
        return False
    try:
        return crypto.decrypt(connection.refresh_token_encrypted) != refresh_token_at_read
    except (crypto.SecretDecryptionError, ImproperlyConfigured):
        return False


def store_tokens(connection: CalendarConnection, snapshot: ConnectionSnapshot) -> None:
    """Persist refreshed (and, for Microsoft, rotated) tokens, encrypted."""
    connection.access_token_encrypted = crypto.encrypt(snapshot.access_token)
    connection.refresh_token_encrypted = crypto.encrypt(snapshot.refresh_token)
    connection.token_expires_at = snapshot.token_expires_at
    connection.save(
        update_fields=["access_token_encrypted", "refresh_token_encrypted", "token_expires_at"]
    )


def _record_failure(
    connection: CalendarConnection,
    error: ProviderError,
    now: datetime,
    secrets: tuple[str, ...],
    result: ConnectionResult,
) -> None:
    message = crypto.scrub(str(error), *secrets)[:MAX_ERROR_LENGTH]
    result.message = message
    connection.last_error = message
    if isinstance(error, NeedsReauth):
        result.outcome = Outcome.NEEDS_REAUTH
        connection.status = ConnectionStatus.NEEDS_REAUTH
        connection.retry_after = None
    else:
        result.outcome = Outcome.FAILED
        connection.status = ConnectionStatus.ERROR
        connection.retry_after = None
        if isinstance(error, RetryLater):
            delay = min(error.retry_after or DEFAULT_BACKOFF, MAX_BACKOFF)
            connection.retry_after = now + delay
    connection.save(update_fields=["last_error", "status", "retry_after"])


def _record_success(
    connection: CalendarConnection,
    snapshot: ConnectionSnapshot,
    fetched: FetchResult,
    now: datetime,
    result: ConnectionResult,
) -> None:
    update_fields = ["last_synced_at", "last_error", "status", "retry_after", "sync_state"]
    connection.last_synced_at = now
    # What a successful sync left out is said where support looks (the last
    # error), the status staying active; an unchanged feed keeps its note.
    if fetched.changed:
        connection.last_error = partial_sync_note(fetched)
    elif connection.status != ConnectionStatus.ACTIVE:
        connection.last_error = ""
    result.message = connection.last_error
    connection.status = ConnectionStatus.ACTIVE
    connection.retry_after = None
    connection.sync_state = fetched.sync_state
    if snapshot.full_sync:
        # Cleared only if it was set when we read the row: a request made while
        # we were fetching still gets its full sync next run.
        connection.resync_requested = False
        update_fields.append("resync_requested")
    if fetched.changed:
        result.outcome = Outcome.SYNCED
        result.created, result.updated, result.deleted = apply_events(
            connection, fetched.events, now
        )
        result.skipped_events = fetched.skipped_events
    else:
        result.outcome = Outcome.UNCHANGED
    connection.save(update_fields=update_fields)


def partial_sync_note(fetched: FetchResult) -> str:
    """One line on what a successful sync left out or repaired; '' when nothing."""
    parts = [f"{fetched.skipped_events} event(s) skipped"] if fetched.skipped_events else []
    parts += fetched.problems
    if not parts:
        return ""
    return ("synced, with problems in the feed: " + "; ".join(parts))[:MAX_ERROR_LENGTH]


def apply_events(
    connection: CalendarConnection, events: list[ProviderEvent], now: datetime
) -> tuple[int, int, int]:
    """Make the connection's rows exactly ``events``; returns (created, updated, deleted)."""
    incoming: dict[tuple[str, datetime | None], ProviderEvent] = {}
    for event in events:
        if event.key in incoming:
            logger.warning("duplicate occurrence from the provider; keeping the last one")
        incoming[event.key] = event
    existing = {
        (row.provider_event_id, row.occurrence_start): row
        for row in CalendarEvent.objects.filter(connection=connection)
    }
    to_create: list[CalendarEvent] = []
    to_update: list[CalendarEvent] = []
    stamp = timezone.now()
    for key, event in incoming.items():
        values = _row_values(event)
        row = existing.pop(key, None)
        if row is None:
            to_create.append(
                CalendarEvent(
                    user_id=connection.user_id,
                    connection=connection,
                    provider_event_id=event.provider_event_id,
                    occurrence_start=event.occurrence_start,
                    **values,
                )
            )
        elif any(getattr(row, name) != value for name, value in values.items()):
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = stamp
            to_update.append(row)
    if to_create:
        CalendarEvent.objects.bulk_create(to_create)
    if to_update:
        CalendarEvent.objects.bulk_update(to_update, [*EVENT_FIELDS, "updated_at"])
    stale = [row.pk for row in existing.values()]
    if stale:
        CalendarEvent.objects.filter(pk__in=stale).delete()
    return len(to_create), len(to_update), len(stale)


def _row_values(event: ProviderEvent) -> dict[str, object]:
    return {
        "title": event.title,
        "starts_at": event.starts_at,
        "ends_at": event.ends_at,
        "all_day": event.all_day,
        "status": event.status,
        "declined": event.declined,
        "reminder_minutes": list(event.reminder_minutes),
    }


def _log_result(result: ConnectionResult) -> None:
    failed = result.outcome in (Outcome.FAILED, Outcome.NEEDS_REAUTH)
    level = logging.WARNING if failed else logging.INFO
    logger.log(
        level,
        "calendar sync connection=%s provider=%s outcome=%s calls=%s created=%s updated=%s "
        "deleted=%s skipped=%s %s",
        result.connection_id,
        result.provider,
        result.outcome,
        result.provider_calls,
        result.created,
        result.updated,
        result.deleted,
        result.skipped_events,
        result.message,
    )
