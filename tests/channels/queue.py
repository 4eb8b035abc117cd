"""Put due nudges on the queue the way materialize would, each inside its owner's scope."""

from __future__ import annotations

from datetime import datetime, timedelta

from followups.models import FollowUp
from scheduled_sends.models import ScheduledSend
from tenancy.scope import tenant_scope
from tests.support.queue import queue_nudge


def queue_follow_up(
    user,
    title: str,
    *,
    now: datetime,
    starts_in: timedelta = timedelta(minutes=10),
    fired_ago: timedelta = timedelta(seconds=30),
) -> ScheduledSend:
    """A follow-up due ``starts_in`` from ``now`` whose nudge fell due ``fired_ago``."""
    with tenant_scope(user.pk):
        follow_up = FollowUp.objects.create(user=user, title=title, due_at=now + starts_in)
    return queue_nudge(
        user.pk, ref_id=follow_up.pk, at=now - fired_ago, subject_starts_at=follow_up.due_at
    )


def reload(row: ScheduledSend) -> ScheduledSend:
    with tenant_scope(row.user_id):
        return ScheduledSend.objects.get(pk=row.pk)


def rows_of(user) -> list[ScheduledSend]:
    with tenant_scope(user.pk):
        return list(ScheduledSend.objects.filter(user=user).order_by("fire_at", "pk"))
