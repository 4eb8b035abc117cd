"""Issue 20, adaptive pacing: where a deliver run's budget ends. A send slot already
reserved in the shared budget is used by the run that holds it; only rows without
one go back to the queue for the next run."""

from __future__ import annotations

from datetime import timedelta

from scheduled_sends.deliver import run_deliver
from scheduled_sends.materialize import run_materialize
from tests.conftest import utc
from tests.sweeps.factories import add_follow_up, rows

NOW = utc(2026, 12, 2, 14, 0)
FIRE = NOW + timedelta(minutes=50)


def test_rows_holding_a_reserved_slot_still_go_when_the_budget_is_spent(
    make_user, recording_channel, settings
):
    """Bullet "the rate in force ... for every process": a slot reserved in the shared
    budget is spent whoever holds it. The run whose budget ends sends the rows it
    already gave slots to (three within the next second at 3/s) instead of handing
    them back — which would leave the channel idle for those slots and send the rows a
    minute later; the rows without a slot go back untried and the next run sends
    them. Every nudge leaves once."""
    users = [make_user() for _ in range(6)]
    for user in users:
        add_follow_up(user, NOW + timedelta(hours=1))
    run_materialize(NOW)

    settings.NUDGE_CONSOLE_RATE = 3
    report = run_deliver(FIRE, budget_seconds=0.01)
    assert report.claimed == 6
    assert report.sent == 3, "the three rows with a slot in the coming second were sent"
    assert report.released == 3
    handed_back = [row for user in users for row in rows(user) if row.outcome is None]
    assert len(handed_back) == 3
    assert all(row.claim_token is None and row.attempts == 0 for row in handed_back)

    settings.NUDGE_CONSOLE_RATE = 0.0
    next_run = run_deliver(FIRE + timedelta(minutes=1))
    assert (next_run.claimed, next_run.sent) == (3, 3)
    assert sorted(m.address for m in recording_channel.sent) == sorted(
        f"user:{user.pk}" for user in users
    ), "every nudge is sent exactly once across the two runs"
