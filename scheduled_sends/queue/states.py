"""What state a queue row is in, derived from its columns, defined once as ``Q``s (the raw
claim and expiry statements carry the same conditions in the shape their plans need).
``now`` may be an instant or ``Now()`` (the database's clock)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.db.models import Case, Count, Expression, Min, Q, Value, When

from core.config import NudgeConfig

Instant = datetime | Expression


class Outcome(models.TextChoices):
    """How a row was settled; stored in ``outcome`` (NULL while unsettled)."""

    SENT = "sent", "Sent"
    SKIPPED = "skipped", "Skipped (nothing worth saying)"
    FAILED = "failed", "Failed (permanent)"
    EXPIRED = "expired", "Expired (past grace, never sent)"


class State(models.TextChoices):
    """Every state a row can be in; the first four are unsettled."""

    PENDING = "pending", "Pending"
    CLAIMED = "claimed", "Claimed (sending)"
    STUCK = "stuck", "Stuck claim"
    RETRYING = "retrying", "Retrying"
    SENT = Outcome.SENT.value, "Sent"
    SKIPPED = Outcome.SKIPPED.value, "Skipped"
    FAILED = Outcome.FAILED.value, "Failed"
    EXPIRED = Outcome.EXPIRED.value, "Expired"


# What support should look at first.
PROBLEM_STATES = (State.FAILED, State.STUCK, State.RETRYING)


def unsettled() -> Q:
    """Not yet sent, skipped, failed or expired: the claim's partial index predicate."""
    return Q(sent_at__isnull=True, outcome__isnull=True)


def in_state(state: str, now: Instant, lease: timedelta) -> Q:
    """The condition for one state; the conditions of the eight states never overlap."""
    claim_expired = now - lease
    conditions = {
        State.PENDING: unsettled() & Q(claimed_at__isnull=True, attempts=0),
        State.RETRYING: unsettled() & Q(claimed_at__isnull=True, attempts__gt=0),
        State.CLAIMED: unsettled() & Q(claimed_at__gte=claim_expired),
        State.STUCK: unsettled() & Q(claimed_at__lt=claim_expired),
    }
    if state in conditions:
        return conditions[state]
    if state in Outcome.values:
        return Q(outcome=state)
    raise ValueError(f"unknown state {state!r}")


def not_under_live_claim(now: Instant, lease: timedelta) -> Q:
    """Nobody is sending it right now: never claimed, or the claimant's lease ran out."""
    return Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - lease)


def inside_grace(now: Instant, grace: timedelta) -> Q:
    """Still worth sending: a late "starts in 10 min" past grace is wrong, not late."""
    return Q(intended_at__gt=now - grace)


def due(now: Instant, grace: timedelta) -> Q:
    """Unsettled, its send time reached and still inside grace: the due backlog."""
    return unsettled() & Q(fire_at__lte=now) & inside_grace(now, grace)


def claimable(now: Instant, grace: timedelta, lease: timedelta) -> Q:
    """What the claim (``statements.CLAIM_DUE``) takes: due, nobody sending it, not held
    (the claim also bounds its walk by grace plus ``NUDGE_MAX_EARLY_MINUTES``)."""
    # not_before: a provider's rate limit asked us to hold it until then.
    return due(now, grace) & not_under_live_claim(now, lease) & ~Q(not_before__gt=now)


def overdue_unclaimed(now: Instant, grace: timedelta, overdue_after: timedelta) -> Q:
    """Claimable for longer than ``overdue_after`` and still unclaimed: delivery is not
    happening. A row waiting for its retry counts from ``not_before``."""
    long_ago = now - overdue_after
    return (
        due(now, grace)
        & Q(claimed_at__isnull=True, fire_at__lte=long_ago)
        & (Q(not_before__isnull=True) | Q(not_before__lte=long_ago))
    )


def waiting_to_retry(now: Instant, grace: timedelta) -> Q:
    """Due, tried before and handed back: waiting for the next deliver run to try again."""
    return due(now, grace) & Q(claimed_at__isnull=True, attempts__gt=0)


def awaiting_expiry(now: Instant, grace: timedelta, lease: timedelta) -> Q:
    """Past grace and unsettled, nobody holding it: the next deliver run expires it."""
    return unsettled() & ~inside_grace(now, grace) & not_under_live_claim(now, lease)


class ScheduledSendQuerySet(models.QuerySet):
    """``ScheduledSend.objects``: each row's state, and the due part's counts."""

    def with_state(self, now: Instant, lease: timedelta) -> ScheduledSendQuerySet:
        """Each row carries ``queue_state`` (a :class:`State` value)."""
        return self.annotate(
            queue_state=Case(
                *(When(in_state(s, now, lease), then=Value(s.value)) for s in State),
                output_field=models.CharField(),
            )
        )

    def due_counts(self, now: datetime, config: NudgeConfig) -> DueCounts:
        """Counts over the queue's due part (one range of the claim's index); no user data."""
        grace, lease, overdue_after = config.grace, config.lease, config.overdue_after
        return DueCounts(
            **self.filter(unsettled(), fire_minute__lte=now, fire_at__lte=now).aggregate(
                due_backlog=Count("pk", filter=inside_grace(now, grace)),
                overdue_unclaimed=Count("pk", filter=overdue_unclaimed(now, grace, overdue_after)),
                waiting_to_retry=Count("pk", filter=waiting_to_retry(now, grace)),
                stuck_claims=Count("pk", filter=in_state(State.STUCK, now, lease)),
                awaiting_expiry=Count("pk", filter=awaiting_expiry(now, grace, lease)),
                oldest_due_fire_at=Min("fire_at"),
            )
        )


@dataclass(frozen=True)
class DueCounts:
    due_backlog: int
    overdue_unclaimed: int
    waiting_to_retry: int
    stuck_claims: int
    awaiting_expiry: int
    oldest_due_fire_at: datetime | None
