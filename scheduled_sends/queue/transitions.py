"""Every write that moves a queue row, each defined once, on the database's clock.

Materialize, Snooze and Done run in the caller's tenant (or planning) scope, support's
writes in its ``support_scope``, fenced by the state support saw. The claim, grouped
settle-ups, expiry, smoothing, receipts and pruning cross tenants, so they take
``rls_bypass()`` here (it reaches ``scheduled_sends`` only); between claim and
settle-up, work runs in the owner's ``tenant_scope``.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Q
from django.db.models.functions import Now

from core.config import NudgeConfig
from scheduled_sends import lateness
from scheduled_sends.failures import UNDELIVERED_STATUSES, FailureKind
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import statements
from scheduled_sends.queue.states import (
    DueCounts,
    Outcome,
    State,
    claimable,
    in_state,
    inside_grace,
    not_under_live_claim,
    unsettled,
)
from tenancy.scope import rls_bypass

logger = logging.getLogger("nudge.queue")

EXPIRED_REASON = "not sent within the grace window"


@dataclass(frozen=True)
class ClaimedSend:
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
    created_at: datetime | None = None  # when it was queued: lateness counts from here at most

    def lateness_at(self, sent_at: datetime) -> float:
        """Seconds late, sent at ``sent_at`` (``lateness.due_from``)."""
        due = lateness.due_from(self.intended_at, self.created_at, sent_at)
        return (sent_at - due).total_seconds()


def run_statement(
    statement: str, params: dict[str, object] | None = None, *, bypass: bool = False
) -> tuple[list[tuple], int]:
    """Run one raw statement, under ``rls_bypass()`` only when asked; its rows (none
    without RETURNING) and how many rows it touched."""
    with rls_bypass() if bypass else nullcontext(), connection.cursor() as cursor:
        cursor.execute(statement, params)
        return (cursor.fetchall() if cursor.description else []), cursor.rowcount


def database_now() -> datetime:
    """The database's clock: one clock for every worker on every machine."""
    rows, _ = run_statement(statements.CURRENT_TIME)
    return rows[0][0]


def claim_params(now: datetime, config: NudgeConfig, limit: int | None = None) -> dict:
    """The claim statement's parameters (plan tests and benchmarks EXPLAIN with these)."""
    return {
        "now": now,
        "grace": config.grace,
        # Fired at most max_early before intended, sendable until grace after.
        "oldest": config.grace + config.max_early + timedelta(minutes=1),
        # Values, not expressions over ``now``: PostgreSQL prunes partitions
        # at plan time only on constants (see statements.CLAIM_DUE).
        "intended_after": now - config.grace,
        "intended_before": now + config.max_early + timedelta(days=1),
        "lease": config.lease,
        "limit": limit or config.batch_size,
    }


def claim_due(now: datetime, config: NudgeConfig, limit: int | None = None) -> list[ClaimedSend]:
    """Claim up to ``limit`` due rows in one statement, in the fair order (``CLAIM_DUE``)."""
    claimed, _ = run_statement(statements.CLAIM_DUE, claim_params(now, config, limit), bypass=True)
    rows = [ClaimedSend(*row) for row in claimed]
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


def _in_batches(
    statement: str,
    params: dict[str, object],
    batch: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Run ``statement`` (``LIMIT %(limit)s``) under the bypass, one short transaction
    per batch, until a batch falls short; how many rows it touched."""
    total = 0
    while True:
        _, touched = run_statement(statement, {**params, "limit": batch}, bypass=True)
        total += touched
        if progress and touched:
            progress(total)
        if touched < batch:
            return total


def expire_past_grace(now: datetime, config: NudgeConfig, batch: int = 1000) -> int:
    """Settle rows that can no longer be sent on time as ``expired``."""
    params = {"now": now, "grace": config.grace, "lease": config.lease, "reason": EXPIRED_REASON}
    return _in_batches(statements.EXPIRE_PAST_GRACE, params, batch)


# Every way a claimed row can move on (MARK_SENDING, SENT, SKIPPED, FAILED, RETRY,
# RELEASE), each one fenced statement: its member's value.
Transition = enum.unique(enum.Enum("Transition", statements.SETTLE))


@dataclass(frozen=True)
class Settlement:
    row: ClaimedSend
    transition: Transition
    at: datetime
    channel: str = ""
    message_id: str = ""
    reason: str = ""
    not_before: datetime | None = None
    failure_kind: str = ""  # a failures.FailureKind for FAILED


def _group_params(settlements: Sequence[Settlement]) -> dict[str, list[object]]:
    return {
        "ids": [s.row.id for s in settlements],
        "intended_ats": [s.row.intended_at for s in settlements],
        "tokens": [s.row.claim_token for s in settlements],
        "ats": [s.at for s in settlements],
        "channels": [s.channel for s in settlements],
        "message_ids": [s.message_id[:128] for s in settlements],
        "reasons": [s.reason for s in settlements],
        "not_befores": [s.not_before for s in settlements],
        "failure_kinds": [str(s.failure_kind) for s in settlements],
    }


def apply(settlements: Sequence[Settlement]) -> set[int]:
    """Apply transitions in one transaction; the ids that matched. A missing id lost
    its claim: after ``MARK_SENDING`` it must not be sent."""
    by_transition: dict[Transition, list[Settlement]] = {}
    for settlement in settlements:
        by_transition.setdefault(settlement.transition, []).append(settlement)
    matched: set[int] = set()
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


def record_receipt(provider_message_id: str, status: str, error_code: str) -> int:
    """Record a provider's delivery receipt by message id, under the bypass (a receipt
    names no tenant); rows updated. A status never moves backwards; a sent row the
    provider gave up on gets failure kind ``undelivered``."""
    status = status.strip().lower()
    rank = statements.RECEIPT_RANKS.get(status)
    if rank is None or not provider_message_id:
        return 0
    params = {
        "provider_message_id": provider_message_id,
        "status": status,
        "error_code": (error_code or "")[:32],
        "rank": rank,
        "failure_kind": FailureKind.UNDELIVERED.value if status in UNDELIVERED_STATUSES else "",
    }
    return run_statement(statements.RECORD_RECEIPT, params, bypass=True)[1]


def prune_settled(cutoff: datetime, batch: int = 5000, progress=None) -> int:
    """Delete settled rows fired before ``cutoff``, one short transaction per batch; how many."""
    return _in_batches(statements.PRUNE_SETTLED, {"cutoff": cutoff}, batch, progress)


def queue_counts(now: datetime, config: NudgeConfig) -> DueCounts:
    """Health's counts over the due part of every tenant's queue; no user data."""
    with rls_bypass():
        return ScheduledSend.objects.due_counts(now, config)


def due_preview(now: datetime, config: NudgeConfig, limit: int = 50) -> tuple[int, list]:
    """What the claim would take at ``now`` (how many, and the first ``limit`` rows as named
    tuples: what ``deliver --dry-run`` lists); writes nothing."""
    with rls_bypass():
        rows = ScheduledSend.objects.filter(claimable(now, config.grace, config.lease))
        first = rows.order_by("fire_at", "pk").values_list(
            "id", "user_id", "channel", "kind", "fire_at", "attempts", named=True
        )
        return rows.count(), list(first[:limit])


def smooth_minute(channel: str, minute: datetime, count: int, by: timedelta) -> int:
    """Move up to ``count`` unplaced nudges of ``minute`` earlier by ``by``; how many moved.
    Only ``fire_at`` changes, never the intended instant (the unique key)."""
    params = {"channel": channel, "minute": minute, "count": count, "by": by}
    return run_statement(statements.MOVE_EARLIER, params, bypass=True)[1]


def load_per_minute(after: datetime, until: datetime) -> dict[str, dict[datetime, int]]:
    """Pending, unclaimed nudges per channel and minute in ``(after, until]``."""
    load: dict[str, dict[datetime, int]] = {}
    params = {"after": after, "until": until}
    for channel, minute, count in run_statement(statements.LOAD_PER_MINUTE, params, bypass=True)[0]:
        load.setdefault(channel, {})[minute.replace(tzinfo=UTC)] = count
    return load


# user_rank is a smallint; beyond this every further nudge shares the last rank.
MAX_RANK = 32_767


@dataclass(frozen=True)
class NewNudge:
    """One row planning (or a Snooze) wants queued; ``user_rank`` at most ``MAX_RANK``."""

    kind: str
    ref_id: int
    intended_at: datetime  # subject start - lead; the send time starts here
    subject_starts_at: datetime
    user_rank: int = 0  # planning ranks a nudge only once it is kept (``planning.ranked``)

    @property
    def key(self) -> tuple[str, int, datetime]:
        return (self.kind, self.ref_id, self.intended_at)


def enqueue(user_id: int, channel: str, nudges: Sequence[NewNudge]) -> int:
    """Insert one user's nudges idempotently; how many were new (``enqueue_many``)."""
    return enqueue_many([(user_id, channel, nudge) for nudge in nudges])[user_id]


def enqueue_many(rows: Sequence[tuple[int, str, NewNudge]]) -> Counter[int]:
    """Insert (user, channel, nudge) rows idempotently in one statement; new rows per user."""
    if not rows:
        return Counter()
    params = {
        "user_ids": [user_id for user_id, _, _ in rows],
        "kinds": [n.kind for _, _, n in rows],
        "ref_ids": [n.ref_id for _, _, n in rows],
        "intended_ats": [n.intended_at for _, _, n in rows],
        "starts": [n.subject_starts_at for _, _, n in rows],
        "ranks": [n.user_rank for _, _, n in rows],
        "channels": [channel for _, channel, _ in rows],
    }
    inserted, _ = run_statement(statements.INSERT_NUDGES, params)
    return Counter(user_id for (user_id,) in inserted)


def withdraw_unclaimed(ids: Sequence[int]) -> Counter[int]:
    """Delete pending, unclaimed rows that no longer match their subject; how many per user.
    Deleting rather than settling lets an event moved away and back be queued afresh."""
    if not ids:
        return Counter()
    withdrawn, _ = run_statement(statements.WITHDRAW_UNCLAIMED, {"ids": list(ids)})
    return Counter(user_id for (user_id,) in withdrawn)


def withdraw_subject(user_id: int, kind: str, ref_id: int) -> int:
    """Delete the subject's pending, unclaimed nudges (Done); how many went. A claimed
    row is left to its run, which re-reads the subject and skips it."""
    deleted, _ = ScheduledSend.objects.filter(
        unsettled(), user_id=user_id, kind=kind, ref_id=ref_id, claimed_at__isnull=True
    ).delete()
    return deleted


# What undoes a claim: the row is claimable again.
_UNCLAIMED = {"claimed_at": None, "claim_token": None, "send_started_at": None}


def _by_support(fence: Q, **sets: object) -> bool:
    """Support's write to one row, fenced by the state support saw; False if it changed."""
    return bool(ScheduledSend.objects.filter(fence).update(**sets))


def release_stuck_claim(
    row_id: int, claim_token: uuid.UUID | None, lease: timedelta, *, even_mid_send: bool
) -> bool:
    """Make a dead run's claim claimable now, fenced on the claim token support saw; False
    if the row is no longer that stuck claim. A row whose send had started may have
    reached the user, so it is released only when ``even_mid_send``."""
    fence = Q(pk=row_id, claim_token=claim_token) & in_state(State.STUCK, Now(), lease)
    if not even_mid_send:
        fence &= Q(send_started_at__isnull=True)
    return _by_support(fence, **_UNCLAIMED)


def retry_failed(row_id: int, grace: timedelta) -> bool:
    """Requeue a failed row; False if it cannot be: only inside grace (later, the message
    would be wrong), never a ``FailureKind.CONFIGURATION`` failure (it fails until an
    operator fixes settings)."""
    fence = Q(pk=row_id, outcome=Outcome.FAILED) & inside_grace(Now(), grace)
    fence &= ~Q(failure_kind=FailureKind.CONFIGURATION)
    return _by_support(
        fence, outcome=None, last_error="", failure_kind="", not_before=None, **_UNCLAIMED
    )


def skip_unsent(row_id: int, reason: str, lease: timedelta) -> bool:
    """Settle an unsent row as skipped; False if it was settled or is under a live claim."""
    fence = Q(pk=row_id) & unsettled() & not_under_live_claim(Now(), lease)
    return _by_support(fence, sent_at=Now(), outcome=Outcome.SKIPPED, last_error=reason)
