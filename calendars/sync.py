"""Sync each connected calendar into local rows: read in the owner's scope, call the
provider with no scope open, write the outcome in a new scope. Success makes the copy
exactly what the provider returned (rows updated in place, so queued nudges keep their
ids); ``invalid_grant`` → ``needs_reauth``, 429/5xx or the budget spent → ``retry_after``,
anything else → ``last_error``. A failure keeps the previous copy and is never raised.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections import namedtuple
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from calendars import statements
from calendars.models import CalendarConnection, ConnectionStatus, Provider
from calendars.push.freshness import fetch_window
from calendars.snapshot import rotated_meanwhile, snapshot_of, token_values
from core.config import NudgeConfig
from providers import caldav, crypto, google, ics, microsoft
from providers.base import (
    ConnectionSnapshot,
    FetchResult,
    NeedsReauth,
    ProviderError,
    ProviderEvent,
    RetryLater,
    calls_in_thread,
)
from providers.ics import feed_origin
from tenancy.scope import run_statements, tenant_read, tenant_scope, tenant_statements

# A window of subjects' start instants: (from, to].
Window = tuple[datetime, datetime]

# Each synced provider's module by its name; each has the same ``fetch``.
PROVIDERS = {module.NAME: module for module in (google, microsoft, ics, caldav)}


logger = logging.getLogger("nudge.calendars.sync")

DEFAULT_BACKOFF = timedelta(minutes=5)
MAX_BACKOFF = timedelta(hours=24)
MAX_ERROR_LENGTH = 1000


class Outcome:
    """``SyncSummary`` counts each in its field of the same name (``SKIPPED_REAUTH`` in
    ``needs_reauth``); ``GONE`` and ``FRESH`` are not counted."""

    SYNCED = "synced"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    NEEDS_REAUTH = "needs_reauth"  # found revoked in this run
    SKIPPED_REAUTH = "skipped_needs_reauth"  # already waiting for the user; not contacted
    BACKING_OFF = "backing_off"  # inside retry_after; not contacted
    DEFERRED = "deferred"  # the user's sync budget was spent; synced next run
    GONE = "gone"  # deleted while we were fetching
    FRESH = "fresh"  # push is live and the stored copy will do; not contacted


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
    # When the provider may be asked again (a back-off), so a caller can come back then.
    retry_after: datetime | None = None

    def __str__(self) -> str:
        """One line, as the sync logs it and ``sync_calendars`` prints it."""
        line = (
            f"connection {self.connection_id} ({self.provider}): {self.outcome}"
            f", {self.provider_calls} calls"
        )
        if self.created or self.updated or self.deleted:
            line += f", events +{self.created} ~{self.updated} -{self.deleted}"
        if self.message:
            line += f" — {self.message}"
        return line


@dataclass
class SyncSummary:
    synced: int = 0
    unchanged: int = 0
    failed: int = 0
    needs_reauth: int = 0
    provider_calls: int = 0
    backing_off: int = 0
    deferred: int = 0
    events_created: int = 0
    events_updated: int = 0
    events_deleted: int = 0
    events_skipped: int = 0
    results: list[ConnectionResult] = field(default_factory=list)
    # Why the user's connections could not even be read (the user is failed, not planned).
    unreadable: Exception | None = None

    def add(self, result: ConnectionResult) -> None:
        self.results.append(result)
        self.provider_calls += result.provider_calls
        self.events_created += result.created
        self.events_updated += result.updated
        self.events_deleted += result.deleted
        self.events_skipped += result.skipped_events
        reauth = result.outcome == Outcome.SKIPPED_REAUTH
        counter = Outcome.NEEDS_REAUTH if reauth else result.outcome
        if counter not in (Outcome.GONE, Outcome.FRESH):
            setattr(self, counter, getattr(self, counter) + 1)


def read_user_connections(
    user_id: int,
    now: datetime,
    window: Window,
    config: NudgeConfig,
    only: Collection[int] | None = None,
) -> list[FetchJob | ConnectionResult]:
    """Each synced connection of the user (or of ``only``; one no longer theirs is
    ``gone``), read in their scope in one round trip: a job to fetch, or the result
    standing for it this run. Least recently synced first, so none starves when
    the user's budget runs out."""
    params = {"user": user_id, "local": Provider.LOCAL.value}
    jobs: list[FetchJob | ConnectionResult] = []
    seen: set[int] = set()
    for *columns, state, email, zone in tenant_read(user_id, statements.USER_CONNECTIONS, params):
        connection = ConnectionRow(*columns, sync_state=json.loads(state) if state else {})
        if only is not None and connection.id not in only:
            continue
        seen.add(connection.id)
        facts = (zone, (email,) if email else ())
        try:
            jobs.append(fetch_decision(connection, now, window, config, facts))
        except Exception as exc:  # one connection's bug must not cost the user's others
            jobs.append(internal_error(connection.id, exc))
    if only is not None:
        jobs += [ConnectionResult(cid, "?", Outcome.GONE) for cid in only if cid not in seen]
    return jobs


# A connection as ``statements.USER_CONNECTIONS`` reads it, named as the model's fields
# so ``fetch_window`` and ``snapshot_of`` take either (a tuple is cheaper).
ConnectionRow = namedtuple("ConnectionRow", [*statements.CONNECTION_COLUMNS, "sync_state"])


def held_back(
    connection: ConnectionRow | CalendarConnection, now: datetime
) -> ConnectionResult | None:
    """The result that stands for ``connection`` at ``now`` whatever its copy or a resync
    request says: it needs re-authorisation, or it is backing off."""
    if connection.status == ConnectionStatus.NEEDS_REAUTH:
        return ConnectionResult(connection.id, connection.provider, Outcome.SKIPPED_REAUTH)
    if connection.retry_after and connection.retry_after > now:
        message = f"backing off until {connection.retry_after:%Y-%m-%d %H:%M}Z"
        return ConnectionResult(
            connection.id,
            connection.provider,
            Outcome.BACKING_OFF,
            message,
            retry_after=connection.retry_after,
        )
    return None


def fetch_decision(
    connection: ConnectionRow,
    now: datetime,
    window: Window,
    config: NudgeConfig,
    facts: tuple[str, tuple[str, ...]],
) -> FetchJob | ConnectionResult:
    """The job asking the provider about ``connection`` over this run's window (push may
    widen it), else the result that stands for this run."""
    held = held_back(connection, now)
    if held is not None:
        return held
    fetch_over = fetch_window(connection, now, *window, config)
    if fetch_over is None:  # push is live and the stored copy covers the window
        return ConnectionResult(connection.id, connection.provider, Outcome.FRESH)
    job = FetchJob(
        connection.user_id, connection.id, connection.provider, snapshot=None, window=fetch_over
    )
    try:
        job.snapshot = snapshot_of(connection, config, facts)
    except (crypto.SecretDecryptionError, ImproperlyConfigured) as exc:
        job.error = ProviderError(str(exc))
        return job
    job.refresh_token_at_read = job.snapshot.refresh_token
    if job.provider in (Provider.ICS, Provider.CALDAV) and job.snapshot.feed_url:
        job.host = feed_origin(job.snapshot.feed_url)
    return job


@dataclass
class FetchJob:
    """One connection between its read and its write: what the provider is given and
    what came back. Only ``fetch_job`` runs off the sweep's thread, and it touches
    no database."""

    user_id: int
    connection_id: int
    provider: str
    snapshot: ConnectionSnapshot | None
    window: Window | None = None  # what the provider is asked for (push may widen it)
    refresh_token_at_read: str = ""
    # The feed's host:port for the per-host cap; None for OAuth providers (paced elsewhere).
    host: str | None = None
    error: ProviderError | None = None
    fetched: FetchResult | None = None
    calls: int = 0  # every attempt's
    seconds: float = 0.0  # the last attempt's
    retries: int = 0  # attempts after a throttle, in this run


def fetch_job(job: FetchJob, now: datetime) -> None:
    """Call the provider for one connection, with no scope open; on any thread. The
    budget starts here, so time spent waiting for a free slot is not charged to it."""
    snapshot, window = job.snapshot, job.window
    assert snapshot is not None and window is not None
    window_start, window_end = window
    started, calls = time.monotonic(), calls_in_thread()
    snapshot.deadline = started + snapshot.config.calendar_sync_budget_seconds
    try:
        job.fetched = PROVIDERS[snapshot.provider].fetch(
            snapshot, now=now, window_start=window_start, window_end=window_end
        )
    except ProviderError as exc:
        job.error = exc
    except Exception as exc:  # a bug in one provider must not stop the sweep
        job.error = ProviderError(f"{job.provider}: internal error ({type(exc).__name__})")
        logger.error(
            "calendar sync crashed for connection %s: %s",
            job.connection_id,
            crypto.scrub("".join(traceback.format_exception(exc)), *snapshot.secrets()),
        )
    job.calls += calls_in_thread() - calls
    job.seconds = time.monotonic() - started


def write_job(job: FetchJob, now: datetime) -> ConnectionResult:
    """Write one connection's outcome in the owner's scope, as one transaction in one
    round trip: an UPDATE of the outcome (and tokens) locking the row, then, for a
    changed copy, ``APPLY_EVENTS`` (which inserts nothing if the row is gone). Only an
    ``invalid_grant`` reads the row first, under lock, to tell a revoked grant from a
    refresh token rotated meanwhile."""
    if isinstance(job.error, NeedsReauth) and job.refresh_token_at_read:
        with tenant_scope(job.user_id), connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            row = CalendarConnection.objects.select_for_update().filter(pk=job.connection_id)
            stored = row.values_list("refresh_token_encrypted", flat=True).first()
            if stored is None:
                return _gone(job)
            error = job.error
            if rotated_meanwhile(stored, job.refresh_token_at_read):
                # A concurrent sync spent and replaced the refresh token we sent
                # (Microsoft rotates them): our invalid_grant says nothing about consent.
                error = RetryLater(f"{job.provider}: refresh token was rotated by another sync")
            outcome, chosen, params = _outcome_statements(job, error, now)
            return _result(job, outcome, run_statements(cursor, chosen, params))
    outcome, chosen, params = _outcome_statements(job, job.error, now)
    # The copy is a cache of the provider (a crash losing it costs one re-fetch), so the
    # commit need not wait for the disk, unless it stores refreshed tokens: Microsoft
    # rotates them, and losing those leaves only a spent refresh token.
    relaxed = job.snapshot is None or not job.snapshot.credentials_changed
    answers = tenant_statements(job.user_id, chosen, params, relaxed_commit=relaxed)
    return _result(job, outcome, answers)


def _gone(job: FetchJob) -> ConnectionResult:
    """The connection was deleted while we fetched: nothing is written."""
    return ConnectionResult(job.connection_id, job.provider, Outcome.GONE, provider_calls=job.calls)


def _outcome_statements(
    job: FetchJob, error: ProviderError | None, now: datetime
) -> tuple[ConnectionResult, list[str], dict[str, object]]:
    """The outcome as far as it is known before writing, and the statements writing it."""
    snapshot = job.snapshot
    outcome = ConnectionResult(job.connection_id, job.provider, Outcome.FAILED)
    outcome.provider_calls = job.calls
    tokens = token_values(snapshot)
    params: dict[str, object] = {**tokens, "id": job.connection_id}
    if error is not None:
        secrets = snapshot.secrets() if snapshot else ()
        outcome.message = crypto.scrub(str(error), *secrets)[:MAX_ERROR_LENGTH]
        status = ConnectionStatus.ERROR
        if isinstance(error, NeedsReauth):
            outcome.outcome = Outcome.NEEDS_REAUTH
            status = ConnectionStatus.NEEDS_REAUTH
        elif isinstance(error, RetryLater):
            delay = min(error.retry_after or DEFAULT_BACKOFF, MAX_BACKOFF)
            outcome.retry_after = now + delay
        params |= {
            "error": outcome.message,
            "status": status.value,
            "retry_after": outcome.retry_after,
        }
        failure = statements.RECORD_FAILURE_WITH_TOKENS if tokens else statements.RECORD_FAILURE
        return outcome, [failure], params
    fetched = job.fetched  # no error: the provider answered
    assert fetched is not None and snapshot is not None
    params |= {  # as ``statements.RECORD_SUCCESS`` takes them
        "now": now,
        "changed": fetched.changed,
        "note": partial_sync_note(fetched) if fetched.changed else "",
        "active": ConnectionStatus.ACTIVE.value,
        "sync_state": json.dumps(fetched.sync_state),
        "full_sync": snapshot.full_sync,
    }
    chosen = [statements.RECORD_SUCCESS_WITH_TOKENS if tokens else statements.RECORD_SUCCESS]
    if fetched.changed:
        params |= _events_params(job.user_id, job.connection_id, fetched.events)
        chosen.append(statements.APPLY_EVENTS)
    return outcome, chosen, params


def _result(
    job: FetchJob, outcome: ConnectionResult, answers: list[list[tuple]]
) -> ConnectionResult:
    """The connection's result from the statements' answers (in order)."""
    if not answers[0]:  # the outcome's UPDATE found no row
        return _gone(job)
    if job.error is None and job.fetched is not None:
        outcome.message = answers[0][0][0]
        if job.fetched.changed:
            outcome.outcome = Outcome.SYNCED
            [(outcome.created, outcome.updated, outcome.deleted)] = answers[1]
            outcome.skipped_events = job.fetched.skipped_events
        else:
            outcome.outcome = Outcome.UNCHANGED
    return outcome


def internal_error(connection_id: int, exc: BaseException) -> ConnectionResult:
    """A failure on our side (a bug, the database): logged with its traceback, counted."""
    logger.error("calendar sync failed for connection %s", connection_id, exc_info=exc)
    return ConnectionResult(
        connection_id, "?", Outcome.FAILED, f"internal error ({type(exc).__name__})"
    )


def partial_sync_note(fetched: FetchResult) -> str:
    """One line on what a successful sync left out or repaired; '' when nothing."""
    parts = [f"{fetched.skipped_events} event(s) skipped"] if fetched.skipped_events else []
    parts += fetched.problems
    if not parts:
        return ""
    return ("synced, with problems in the feed: " + "; ".join(parts))[:MAX_ERROR_LENGTH]


def _events_params(
    user_id: int, connection_id: int, events: list[ProviderEvent]
) -> dict[str, object]:
    """The occurrences as ``statements.APPLY_EVENTS`` takes them: JSON, one per key (the
    last), named as ``ProviderEvent``'s fields, instants in ISO 8601."""
    incoming: dict[tuple[str, datetime | None], dict[str, object]] = {}
    for event in events:
        if event.key in incoming:
            logger.warning("duplicate occurrence from the provider; keeping the last one")
        incoming[event.key] = vars(event)
    return {
        "events": json.dumps(
            list(incoming.values()), ensure_ascii=False, default=datetime.isoformat
        ),
        "connection": connection_id,
        "user": user_id,
        "stamp": timezone.now(),
    }
