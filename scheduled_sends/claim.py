"""The claim and its settle-up: the only queue writes that cross tenants.

(Plus their bookkeeping neighbours: expiry, delivery receipts, retention
pruning and the health counts — each touches only ``scheduled_sends``, the
one table the sweeper role has privileges on.)

Each function here is one statement in its own ``rls_bypass()`` transaction.
The claim has to find due rows before it can know whose they are, so it
cannot carry a tenant; everything between claim and settle-up — reading the
user's settings and subject, composing, sending — happens in the owner's
``tenant_scope`` or outside the database, never under the bypass.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from scheduled_sends import queue_sql
from scheduled_sends.config import QueueConfig
from tenancy.scope import rls_bypass

logger = logging.getLogger("nudge.claim")

EXPIRED_REASON = "not sent within the grace window"


@dataclass(frozen=True)
class ClaimedSend:
    """What delivery needs about one claimed row, including its owner."""

    id: int
    user_id: int
    kind: str
    ref_id: int
    fire_at: datetime
    subject_starts_at: datetime
    claim_token: uuid.UUID
    attempts: int
    send_started_at: datetime | None


def database_now() -> datetime:
    """The database's clock: one clock for every worker on every machine."""
    with connection.cursor() as cursor:
        cursor.execute(queue_sql.CURRENT_TIME)
        return cursor.fetchone()[0]


def claim_due(now: datetime, config: QueueConfig, limit: int | None = None) -> list[ClaimedSend]:
    """Claim up to ``limit`` due rows, oldest first, in one statement."""
    params = {
        "now": now,
        "grace": config.grace,
        "lease": config.lease,
        "limit": limit or config.batch_size,
    }
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(queue_sql.CLAIM_DUE, params)
        rows = [ClaimedSend(*row) for row in cursor.fetchall()]
    # RETURNING has no order; deliver oldest first.
    rows.sort(key=lambda row: (row.fire_at, row.id))
    return rows


def expire_past_grace(now: datetime, config: QueueConfig, batch: int = 1000) -> int:
    """Settle rows that can no longer be sent on time as ``expired``."""
    total = 0
    while True:
        with rls_bypass(), connection.cursor() as cursor:
            cursor.execute(
                queue_sql.EXPIRE_PAST_GRACE,
                {
                    "now": now,
                    "grace": config.grace,
                    "lease": config.lease,
                    "limit": batch,
                    "reason": EXPIRED_REASON,
                },
            )
            expired = cursor.rowcount
        total += expired
        if expired < batch:
            return total


def _fenced(statement: str, row: ClaimedSend, now: datetime, **params: object) -> bool:
    """Run one fenced settle-up; False means the claim was no longer ours."""
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(statement, {"id": row.id, "token": row.claim_token, "now": now, **params})
        matched = cursor.rowcount == 1
    if not matched:
        logger.warning(
            "settle matched no row: the claim was lost (lease expired and re-claimed?)",
            extra={"send_id": row.id, "statement": statement.split()[0]},
        )
    return matched


def mark_sending(row: ClaimedSend, now: datetime, channel: str) -> bool:
    return _fenced(queue_sql.MARK_SENDING, row, now, channel=channel)


def settle_sent(row: ClaimedSend, now: datetime, channel: str, provider_message_id: str) -> bool:
    return _fenced(
        queue_sql.SETTLE_SENT,
        row,
        now,
        channel=channel,
        provider_message_id=provider_message_id[:128],
    )


def settle_skipped(row: ClaimedSend, now: datetime, reason: str) -> bool:
    return _fenced(queue_sql.SETTLE_SKIPPED, row, now, reason=reason)


def settle_failed(row: ClaimedSend, now: datetime, reason: str) -> bool:
    return _fenced(queue_sql.SETTLE_FAILED, row, now, reason=reason)


def settle_retry(
    row: ClaimedSend, now: datetime, reason: str, not_before: datetime | None = None
) -> bool:
    return _fenced(queue_sql.SETTLE_RETRY, row, now, reason=reason, not_before=not_before)


def release_untried(row: ClaimedSend, now: datetime, not_before: datetime | None = None) -> bool:
    return _fenced(queue_sql.RELEASE_UNTRIED, row, now, not_before=not_before)


def record_receipt(
    provider_message_id: str, status: str, error_code: str, now: datetime | None = None
) -> int:
    """Record a provider's delivery receipt on the row it belongs to; rows updated.

    The receipt names only the provider's message id, not a tenant, so this is
    settle-up bookkeeping under the bypass. Out-of-order receipts never move a
    row's status backwards.
    """
    status = status.strip().lower()
    rank = queue_sql.RECEIPT_RANKS.get(status)
    if rank is None or not provider_message_id:
        return 0
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(
            queue_sql.RECORD_RECEIPT,
            {
                "provider_message_id": provider_message_id,
                "status": status,
                "error_code": (error_code or "")[:32],
                "rank": rank,
                "now": now or database_now(),
            },
        )
        return cursor.rowcount


def prune_settled(cutoff: datetime, batch: int = 5000, progress=None) -> int:
    """Delete settled rows whose fire time is before ``cutoff``; returns how many.

    Each batch is its own short transaction, so pruning never holds locks on
    more than ``batch`` rows or competes with the claim for long.
    """
    total = 0
    while True:
        with rls_bypass(), connection.cursor() as cursor:
            cursor.execute(queue_sql.PRUNE_SETTLED, {"cutoff": cutoff, "limit": batch})
            deleted = cursor.rowcount
        total += deleted
        if progress and deleted:
            progress(total)
        if deleted < batch:
            return total


@dataclass(frozen=True)
class QueueCounts:
    due_backlog: int
    overdue_unclaimed: int
    stuck_claims: int
    awaiting_expiry: int
    oldest_due_fire_at: datetime | None


def queue_counts(now: datetime, config: QueueConfig) -> QueueCounts:
    """Counts over the due part of the queue, for health; no user data."""
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(
            queue_sql.QUEUE_HEALTH,
            {
                "now": now,
                "grace": config.grace,
                "lease": config.lease,
                "overdue": config.overdue_after,
            },
        )
        return QueueCounts(*cursor.fetchone())
