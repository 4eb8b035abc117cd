"""Queue rows in tests the one way production makes them: ``transitions.enqueue``; settle
one the way deliver does, through ``transitions.apply``."""

from __future__ import annotations

from datetime import datetime

from accounts.models import DeliverySettings
from scheduled_sends.models import Kind, ScheduledSend
from scheduled_sends.queue.transitions import (
    ClaimedSend,
    NewNudge,
    Settlement,
    Transition,
    apply,
    enqueue,
)
from tenancy.scope import tenant_scope


def queue_nudge(
    user_id: int,
    *,
    ref_id: int,
    at: datetime,
    subject_starts_at: datetime,
    kind: str = Kind.FOLLOW_UP,
    rank: int = 0,
) -> ScheduledSend:
    """One pending nudge meant for (and fired at) ``at``, on the user's channel.

    Written inside the owner's scope, as materialize writes it; the row read back.
    """
    with tenant_scope(user_id):
        delivery = DeliverySettings.objects.filter(user_id=user_id).first()
        nudge = NewNudge(kind, ref_id, at, subject_starts_at, rank)
        enqueue(user_id, delivery.channel if delivery else "", [nudge])
        return ScheduledSend.objects.get(user_id=user_id, kind=kind, ref_id=ref_id, intended_at=at)


def settle_one(row: ClaimedSend, transition: Transition, at: datetime, **fields: object) -> bool:
    """One row's transition in its own transaction; False if the claim was lost."""
    return row.id in apply([Settlement(row, transition, at, **fields)])
