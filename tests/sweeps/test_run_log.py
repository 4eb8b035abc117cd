"""A run killed before it could record its end does not read "running" forever."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from scheduled_sends.models import SweepRun
from scheduled_sends.runlog import NEVER_FINISHED
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.conftest import utc

NOW = utc(2026, 12, 2, 10, 0)


def _run_left_running(sweep: str, minutes_ago: float) -> SweepRun:
    """A run record as a SIGKILLed process leaves it: created, never finished."""
    run = SweepRun.objects.create(sweep=sweep, as_of=NOW)
    SweepRun.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return run


def test_the_next_materialize_closes_a_killed_participants_run_as_never_finished(db, settings):
    settings.NUDGE_MATERIALIZE_BUDGET_SECONDS = 780  # may stay "running" 31 minutes
    killed = _run_left_running(SweepRun.Sweep.MATERIALIZE, minutes_ago=40)
    live = _run_left_running(SweepRun.Sweep.MATERIALIZE, minutes_ago=5)
    other_sweep = _run_left_running(SweepRun.Sweep.DELIVER, minutes_ago=5)

    run_materialize(NOW)

    killed.refresh_from_db()
    assert killed.status == SweepRun.Status.FAILED
    assert killed.error == NEVER_FINISHED
    assert killed.finished_at is not None
    # A participant that may still be at work, and another sweep's run, are left alone.
    assert SweepRun.objects.get(pk=live.pk).status == SweepRun.Status.RUNNING
    assert SweepRun.objects.get(pk=other_sweep.pk).status == SweepRun.Status.RUNNING


def test_the_next_deliver_closes_a_killed_deliver_run(db, recording_channel, settings):
    settings.NUDGE_RUN_BUDGET_SECONDS = 55  # may stay "running" 6 min 50 s
    killed = _run_left_running(SweepRun.Sweep.DELIVER, minutes_ago=8)

    run_deliver(NOW)

    killed.refresh_from_db()
    assert (killed.status, killed.error) == (SweepRun.Status.FAILED, NEVER_FINISHED)
    newest = SweepRun.objects.filter(sweep=SweepRun.Sweep.DELIVER).latest("pk")
    assert newest.status == SweepRun.Status.OK
