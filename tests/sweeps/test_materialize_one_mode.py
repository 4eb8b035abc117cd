"""Materialize runs one way: the shared cycle. More capacity is more of the same process;
a run of named users is the only other shape, and it is safe beside a cycle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduled_sends.models import SweepRun
from sweeps.materialize import run_materialize
from tests.conftest import utc
from tests.support.processes import manage, subprocess_env
from tests.sweeps.factories import add_event, add_follow_up, rows

NOW = utc(2026, 12, 2, 14, 0)


@pytest.mark.django_db(transaction=True)
def test_three_processes_on_one_cron_line_queue_every_users_nudges_once(make_user, settings):
    """What ``--workers 3`` did: three processes started at once take part in one
    cycle, every user is planned once, and each process logs its own part."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 2
    users = [make_user() for _ in range(12)]
    for i, user in enumerate(users):
        add_event(user, NOW + timedelta(minutes=30 + i))
        add_follow_up(user, NOW + timedelta(hours=1))
    env = subprocess_env(NUDGE_MATERIALIZE_SLICE_USERS="2")
    processes = [
        manage("materialize", "--now", NOW.isoformat(), "--no-sync", env=env) for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]

    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert all(len(rows(user)) == 2 for user in users)
    runs = SweepRun.objects.filter(sweep="materialize", status="ok")
    assert sum(run.counts["users"] for run in runs) == 12  # each user by one process
    assert sum(run.counts["queued"] for run in runs) == 24


@pytest.mark.django_db
def test_the_command_has_no_workers_option():
    """``--workers`` went: start more processes on the cron line instead."""
    with pytest.raises(CommandError, match="--workers"):
        call_command("materialize", "--workers", "2")


@pytest.mark.django_db(transaction=True)
def test_a_run_of_named_users_beside_a_cycle_queues_each_nudge_once(make_user):
    """No lock between runs: the queue's unique key makes a named run safe beside a cycle."""
    alice, bob = make_user(), make_user()
    add_follow_up(alice, NOW + timedelta(hours=1))
    add_follow_up(bob, NOW + timedelta(hours=1))

    named = run_materialize(NOW, user_ids=[alice.pk], sync_calendars=False)
    cycle = run_materialize(NOW, sync_calendars=False)

    assert (named.users, named.queued, named.cycle) == (1, 1, None)
    assert (cycle.users, cycle.queued) == (2, 1)  # alice's nudge was already there
    assert len(rows(alice)) == len(rows(bob)) == 1
    assert SweepRun.objects.filter(sweep="materialize").count() == 2


@pytest.mark.django_db
def test_a_named_run_cut_short_by_its_budget_says_so(make_user, settings):
    users = [make_user() for _ in range(4)]
    settings.NUDGE_MATERIALIZE_BUDGET_SECONDS = 1e-9  # spent before the first user
    cut = run_materialize(NOW, user_ids=[u.pk for u in users], sync_calendars=False)
    assert cut.cut_short and cut.users == 0
    assert "CUT SHORT by its budget: the users not reached wait for the next cycle" in (
        cut.summary()
    )
