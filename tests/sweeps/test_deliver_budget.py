"""Issue 20, adaptive pacing: where a deliver run's budget ends. A send slot already
reserved in the shared budget is used by the run that holds it; a live run with due
rows goes on until the next cron minute's run has started; only a replay, or a run
no successor relieves, hands rows back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from messaging.channels.base import NudgeMessage, SendReceipt
from scheduled_sends.models import SweepRun
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.channels.queue import queue_follow_up
from tests.conftest import utc
from tests.support.recording import RecordingChannel
from tests.sweeps.factories import add_follow_up, rows

NOW = utc(2026, 12, 2, 14, 0)
FIRE = NOW + timedelta(minutes=50)


def test_rows_holding_a_reserved_slot_still_go_when_the_budget_is_spent(
    make_user, recording_channel, settings
):
    """Bullet "the rate in force ... for every process": a slot reserved in the shared
    budget is spent whoever holds it. A replay whose half-second budget ends still sends
    the rows it already gave slots (at 3/s, the three of the first second, and any
    reserved since) instead of handing them back — which left the channel idle for
    those slots and sent the rows a minute later; the rows without a slot go back
    untried and the next run sends them. Every nudge leaves once."""
    users = [make_user() for _ in range(9)]
    for user in users:
        add_follow_up(user, NOW + timedelta(hours=1))
    run_materialize(NOW)

    settings.NUDGE_CONSOLE_RATE = 3
    report = run_deliver(FIRE, budget_seconds=0.5)
    assert report.claimed == 9
    # Before, only the slots opening within the half second were used (at most two).
    assert report.sent >= 3, "the rows with a slot in the coming second were sent"
    assert report.released >= 1 and report.sent + report.released == 9
    handed_back = [row for user in users for row in rows(user) if row.outcome is None]
    assert len(handed_back) == report.released
    assert all(row.claim_token is None and row.attempts == 0 for row in handed_back)

    settings.NUDGE_CONSOLE_RATE = 0.0
    next_run = run_deliver(FIRE + timedelta(minutes=1))
    assert (next_run.claimed, next_run.sent) == (report.released, report.released)
    assert sorted(m.address for m in recording_channel.sent) == sorted(
        f"user:{user.pk}" for user in users
    ), "every nudge is sent exactly once across the two runs"


class NextRunStarts(RecordingChannel):
    """Records sends; the first one coincides with the next cron minute's deliver run
    starting (its row appears in the run log, as ``recorded_run`` writes it)."""

    next_run_started = False

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        if not NextRunStarts.next_run_started:
            NextRunStarts.next_run_started = True
            try:  # on the send's worker thread: its own connection, closed after
                SweepRun.objects.create(sweep=SweepRun.Sweep.DELIVER, as_of=timezone.now())
            finally:
                connection.close()
        return super().send(address, message)


def _due_now(make_user, count: int) -> list:
    now = timezone.now()
    users = [make_user() for _ in range(count)]
    for i, user in enumerate(users):
        queue_follow_up(user, f"follow-up {i}", now=now)
    return users


@pytest.mark.django_db(transaction=True)
def test_a_live_run_past_its_budget_goes_on_until_the_next_run_is_up(
    make_user, recording_channel, settings
):
    """Bullet "an adaptive shared pacer" (the minute boundary): a run's budget ends
    seconds before the next cron run can send (its process is still starting), and in
    a burst's last minute the nudges waiting through that gap leave after their +1
    edge. With due rows left and no next run in the run log, the run goes on: all
    twelve leave from it, though 4/s needs three seconds and its budget is 0.2."""
    users = _due_now(make_user, 12)
    settings.NUDGE_CONSOLE_RATE = 4
    report = run_deliver(budget_seconds=0.2, batch_size=2)
    assert (report.claimed, report.sent, report.released) == (12, 12, 0)
    assert sorted(m.address for m in recording_channel.sent) == sorted(
        f"user:{user.pk}" for user in users
    )


@pytest.mark.django_db(transaction=True)
def test_once_the_next_run_has_started_the_old_one_claims_no_more(make_user, settings):
    """Bullet "an adaptive shared pacer" (the minute boundary): the next run's row in
    the run log is the handover. Past its budget the old run then claims nothing new,
    sends the rows it holds (handing them back could strand them: the new run may
    already have found the queue empty) and ends; the rest stay unclaimed for the new
    run, and every nudge leaves once."""
    settings.NUDGE_CHANNEL_BACKENDS = {"console": f"{__name__}.NextRunStarts"}
    settings.NUDGE_SEND_CONCURRENCY = 1  # holds two rows at a time
    RecordingChannel.reset()
    NextRunStarts.next_run_started = False
    users = _due_now(make_user, 12)
    settings.NUDGE_CONSOLE_RATE = 4
    report = run_deliver(budget_seconds=0.5, batch_size=2)
    assert 2 <= report.sent < 12 and report.released == 0
    assert report.claimed == report.sent
    left = [row for user in users for row in rows(user) if row.outcome is None]
    assert len(left) == 12 - report.sent
    assert all(row.claim_token is None and row.attempts == 0 for row in left)

    settings.NUDGE_CONSOLE_RATE = 0.0
    run_deliver()
    assert sorted(m.address for m in RecordingChannel.sent) == sorted(
        f"user:{user.pk}" for user in users
    ), "every nudge is sent exactly once across the two runs"
    RecordingChannel.reset()
