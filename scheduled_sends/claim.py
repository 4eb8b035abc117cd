"""The claim and its settle-ups: the only queue writes that cross tenants.

(Plus their bookkeeping neighbours: expiry, burst smoothing, delivery
receipts, retention pruning and the health counts — each touches only
``scheduled_sends``, the one table the sweeper role has privileges on.)

Every transition of a claimed row is here, each one statement over a group
of rows (:class:`Settlement`), and a group of groups is one ``rls_bypass()``
transaction: delivery pays one commit per flush, not two per row.
The claim has to find due rows before it can know whose they are, so it
cannot carry a tenant; everything between claim and settle-up — reading the
user's settings and subject, composing, sending — happens in the owner's
``tenant_scope`` or outside the database, never under the bypass.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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
    intended_at: datetime
    fire_at: datetime
    subject_starts_at: datetime
    claim_token: uuid.UUID
    attempts: int
    send_started_at: datetime | None
    user_rank: int = 0


def database_now() -> datetime:
    """The database's clock: one clock for every worker on every machine."""
    with connection.cursor() as cursor:
        cursor.execute(queue_sql.CURRENT_TIME)
        return cursor.fetchone()[0]


def claim_params(now: datetime, config: QueueConfig, limit: int | None = None) -> dict:
    """The claim statement's parameters (also what plan tests and benchmarks EXPLAIN)."""
    return {
        "now": now,
        "grace": config.grace,
        # A row moved earlier waits at most max_early before its intended
        # instant, and is sendable until grace after it: the oldest minute
        # the index walk has to start from.
        "oldest": config.grace + config.max_early + timedelta(minutes=1),
        "lease": config.lease,
        "limit": limit or config.batch_size,
    }


def claim_due(now: datetime, config: QueueConfig, limit: int | None = None) -> list[ClaimedSend]:
    """Claim up to ``limit`` due rows in one statement, in the fair order (see queue_sql)."""
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(queue_sql.CLAIM_DUE, claim_params(now, config, limit))
        rows = [ClaimedSend(*row) for row in cursor.fetchall()]
    # RETURNING has no order; deliver in the claim's own (fair) order.
    rows.sort(
        key=lambda row: (
            row.fire_at.replace(second=0, microsecond=0),
            row.user_rank,
            row.fire_at,
            row.id,
        )
    )
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


class Transition(enum.Enum):
    """Every way a claimed row can move on, each one fenced statement."""

    MARK_SENDING = queue_sql.MARK_SENDING
    SENT = queue_sql.SETTLE_SENT
    SKIPPED = queue_sql.SETTLE_SKIPPED
    FAILED = queue_sql.SETTLE_FAILED
    RETRY = queue_sql.SETTLE_RETRY
    RELEASE = queue_sql.RELEASE_UNTRIED


@dataclass(frozen=True)
class Settlement:
    """One claimed row's transition and what it writes."""

    row: ClaimedSend
    transition: Transition
    at: datetime
    channel: str = ""
    message_id: str = ""
    reason: str = ""
    not_before: datetime | None = None


def _group_params(settlements: Sequence[Settlement]) -> dict[str, list[object]]:
    return {
        "ids": [s.row.id for s in settlements],
        "tokens": [s.row.claim_token for s in settlements],
        "ats": [s.at for s in settlements],
        "channels": [s.channel for s in settlements],
        "message_ids": [s.message_id[:128] for s in settlements],
        "reasons": [s.reason for s in settlements],
        "not_befores": [s.not_before for s in settlements],
    }


def apply(settlements: Sequence[Settlement]) -> set[int]:
    """Apply a group of transitions in one transaction; the ids that matched.

    A row missing from the answer had lost its claim (lease expired and
    re-claimed): for ``MARK_SENDING`` that means it must not be sent.
    """
    by_transition: dict[Transition, list[Settlement]] = {}
    for settlement in settlements:
        by_transition.setdefault(settlement.transition, []).append(settlement)
    matched: set[int] = set()
    if not by_transition:
        return matched
    with rls_bypass(), connection.cursor() as cursor:
        for transition, group in by_transition.items():
            cursor.execute(transition.value, _group_params(group))
            matched.update(row_id for (row_id,) in cursor.fetchall())
    lost = [s.row.id for s in settlements if s.row.id not in matched]
    if lost:
        logger.warning(
            "settle matched no row: the claim was lost (lease expired and re-claimed?)",
            extra={"send_ids": lost[:20], "lost": len(lost)},
        )
    return matched


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


def settle_one(row: ClaimedSend, transition: Transition, at: datetime, **fields: object) -> bool:
    """One row's transition in its own transaction; False if the claim was lost."""
    return row.id in apply([Settlement(row, transition, at, **fields)])


def smooth_minute(channel: str, minute: datetime, count: int, by: timedelta) -> int:
    """Move up to ``count`` unplaced nudges of ``minute`` earlier by ``by``; how many moved.

    A queue transition of pending rows across tenants, so it runs under the
    bypass like the claim; it changes only ``fire_at`` (never the intended
    instant, so the unique key and the message are untouched).
    """
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(
            queue_sql.MOVE_EARLIER,
            {"channel": channel, "minute": minute, "count": count, "by": by},
        )
        return cursor.rowcount


def load_per_minute(after: datetime, until: datetime) -> dict[str, dict[datetime, int]]:
    """Pending, unclaimed nudges per channel and minute in ``(after, until]``."""
    load: dict[str, dict[datetime, int]] = {}
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(queue_sql.LOAD_PER_MINUTE, {"after": after, "until": until})
        for channel, minute, count in cursor.fetchall():
            load.setdefault(channel, {})[minute.replace(tzinfo=UTC)] = count
    return load
