"""The queue's states (``queue/states.py``) and its raw statements say the same thing.

The claim and expiry are raw SQL, shaped for their plans; the states are
queryset conditions that the console, health and the support actions use.
If the two drifted, support would see a row as "pending" that delivery never
claims, or health would count as overdue what expiry leaves alone. Here every
combination of the columns that decide a row's fate is queued at once, and
each statement must touch exactly the rows its condition names.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta

import pytest
from django.db.models import Q
from django.utils import timezone

from core.config import NudgeConfig
from scheduled_sends.models import Kind, ScheduledSend
from scheduled_sends.queue import states, transitions
from tenancy.scope import support_scope, tenant_scope
from tests.conftest import utc

NOW = utc(2026, 12, 2, 15, 0)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def every_kind_of_row(make_user) -> list[int]:
    """One row per combination of send time, smoothing, claim, provider hold, tries and outcome."""
    config = NudgeConfig.from_settings()
    user = make_user()
    sends = [-30 * MINUTE, -16 * MINUTE, -14 * MINUTE, -2 * MINUTE, timedelta(0), 2 * MINUTE]
    moved_earlier = [timedelta(0), 5 * MINUTE]
    claims = [None, timedelta(seconds=5), config.lease + MINUTE]
    holds = [None, -MINUTE, MINUTE]
    outcomes = [None, "failed", "sent"]
    ids = []
    with tenant_scope(user.pk):
        for n, (send, moved, claimed_ago, hold, attempts, outcome) in enumerate(
            itertools.product(sends, moved_earlier, claims, holds, (0, 1), outcomes)
        ):
            fire_at = NOW + send
            row = ScheduledSend.objects.create(
                user=user,
                kind=Kind.FOLLOW_UP,
                ref_id=n + 1,
                fire_at=fire_at,
                intended_at=fire_at + moved,
                subject_starts_at=fire_at + moved + 10 * MINUTE,
                claimed_at=None if claimed_ago is None else NOW - claimed_ago,
                claim_token=None if claimed_ago is None else uuid.uuid4(),
                not_before=None if hold is None else NOW + hold,
                attempts=attempts,
                outcome=outcome,
                sent_at=fire_at if outcome == "sent" else None,
            )
            ids.append(row.pk)
    return ids


def _ids(condition) -> set[int]:
    with support_scope():
        return set(ScheduledSend.objects.filter(condition).values_list("pk", flat=True))


def test_the_claim_takes_exactly_the_claimable_rows(every_kind_of_row):
    config = NudgeConfig.from_settings()
    claimable = _ids(states.claimable(NOW, config.grace, config.lease))
    assert claimable, "the grid must hold claimable rows"

    claimed = {row.id for row in transitions.claim_due(NOW, config, limit=10_000)}

    assert claimed == claimable
    # …and each is now, by the states' own definition, claimed.
    assert _ids(states.in_state(states.State.CLAIMED, NOW, config.lease)) >= claimed


def test_expiry_settles_exactly_the_rows_awaiting_it(every_kind_of_row):
    config = NudgeConfig.from_settings()
    awaiting = _ids(states.awaiting_expiry(NOW, config.grace, config.lease))
    assert awaiting, "the grid must hold rows past grace"
    already = _ids(states.in_state(states.State.EXPIRED, NOW, config.lease))

    expired = transitions.expire_past_grace(NOW, config)

    now_expired = _ids(states.in_state(states.State.EXPIRED, NOW, config.lease)) - already
    assert expired == len(now_expired)
    assert now_expired == awaiting


def test_health_counts_are_the_states_counted(every_kind_of_row):
    """Health reads the due part of the queue: rows whose send time has come."""
    config = NudgeConfig.from_settings()
    come = Q(fire_at__lte=NOW)

    counts = transitions.queue_counts(NOW, config)

    assert counts.due_backlog == len(_ids(states.due(NOW, config.grace)))
    assert counts.stuck_claims == len(
        _ids(states.in_state(states.State.STUCK, NOW, config.lease) & come)
    )
    assert counts.overdue_unclaimed == len(
        _ids(states.overdue_unclaimed(NOW, config.grace, config.overdue_after))
    )
    assert counts.awaiting_expiry == len(
        _ids(states.awaiting_expiry(NOW, config.grace, config.lease))
    )


# --- support's transitions re-judge the row when they write ----------------------
# The console refuses what it can see is wrong; these fences catch what changed
# between its confirmation page and the click.


def _one_row(user, **fields) -> ScheduledSend:
    now = timezone.now()
    values = {
        "kind": Kind.FOLLOW_UP,
        "ref_id": 1,
        "fire_at": now - MINUTE,
        "intended_at": now - MINUTE,
        "subject_starts_at": now + 9 * MINUTE,
        **fields,
    }
    with tenant_scope(user.pk):
        return ScheduledSend.objects.create(user=user, **values)


def _reload(row) -> ScheduledSend:
    with tenant_scope(row.user_id):
        return ScheduledSend.objects.get(pk=row.pk)


def _as_support(transition, *args, **kwargs) -> bool:
    with support_scope():
        return transition(*args, **kwargs)


def test_retry_refuses_a_failed_row_whose_grace_ran_out(make_user):
    config = NudgeConfig.from_settings()
    late = timezone.now() - config.grace - MINUTE
    row = _one_row(make_user(), fire_at=late, intended_at=late, outcome="failed", attempts=1)
    assert not _as_support(transitions.retry_failed, row.pk, config.grace)
    assert _reload(row).outcome == "failed"

    fresh = _one_row(make_user(), outcome="failed", attempts=1, last_error="[500] down")
    assert _as_support(transitions.retry_failed, fresh.pk, config.grace)
    assert (_reload(fresh).outcome, _reload(fresh).last_error) == (None, "")


def test_skip_refuses_a_row_a_run_has_just_claimed(make_user):
    config = NudgeConfig.from_settings()
    now = timezone.now()
    live = _one_row(make_user(), claimed_at=now, claim_token=uuid.uuid4())
    assert not _as_support(transitions.skip_unsent, live.pk, "by support: test", config.lease)
    assert _reload(live).outcome is None

    stuck = _one_row(make_user(), claimed_at=now - config.lease - MINUTE, claim_token=uuid.uuid4())
    assert _as_support(transitions.skip_unsent, stuck.pk, "by support: test", config.lease)
    assert _reload(stuck).outcome == "skipped" and _reload(stuck).sent_at is not None


def test_release_refuses_a_live_claim_and_a_started_send_unless_told(make_user):
    config = NudgeConfig.from_settings()
    now = timezone.now()
    token = uuid.uuid4()
    live = _one_row(make_user(), claimed_at=now, claim_token=token)
    assert not _as_support(
        transitions.release_stuck_claim, live.pk, token, config.lease, even_mid_send=False
    )
    assert _reload(live).claim_token == token

    dead = now - config.lease - MINUTE
    mid_send = _one_row(make_user(), claimed_at=dead, claim_token=token, send_started_at=dead)
    release = transitions.release_stuck_claim
    assert not _as_support(release, mid_send.pk, token, config.lease, even_mid_send=False)
    assert not _as_support(release, mid_send.pk, uuid.uuid4(), config.lease, even_mid_send=True)
    assert _as_support(release, mid_send.pk, token, config.lease, even_mid_send=True)
    assert _reload(mid_send).claimed_at is None
