"""Materialize at scale: split over processes it queues what one process would, once;
runs never pile up on each other, and a run cut short hands over where it stopped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from scheduled_sends.models import SweepRun
from scheduled_sends.queue import statements
from sweeps.materialize import _resume_point, run_materialize, users_to_visit
from tests.conftest import utc
from tests.sweeps.factories import add_event, add_follow_up, rows

NOW = utc(2026, 12, 2, 14, 0)


@pytest.mark.django_db(transaction=True)
def test_three_workers_queue_every_users_nudges_once(make_user):
    users = [make_user() for _ in range(12)]
    for i, user in enumerate(users):
        add_event(user, NOW + timedelta(minutes=30 + i))
        add_follow_up(user, NOW + timedelta(hours=1))
    report = run_materialize(NOW, workers=3, sync_calendars=False)
    assert (report.users, report.queued, report.failed_users) == (12, 24, 0)
    assert all(len(rows(user)) == 2 for user in users)
    again = run_materialize(NOW, workers=3, sync_calendars=False)
    assert again.queued == 0
    assert all(len(rows(user)) == 2 for user in users)
    # One run each in the log, however many processes did the work.
    assert SweepRun.objects.filter(sweep="materialize").count() == 2


@pytest.mark.django_db
def test_the_command_refuses_zero_workers():
    with pytest.raises(CommandError, match="--workers"):
        call_command("materialize", "--workers", "0")


@pytest.mark.django_db(transaction=True)
def test_a_run_overlapping_a_running_one_does_nothing(make_user):
    add_follow_up(make_user(), NOW + timedelta(hours=1))
    holder = connection.get_new_connection(connection.get_connection_params())
    try:
        holder.autocommit = True
        assert holder.execute(statements.TRY_MATERIALIZE_LOCK).fetchone()[0] is True
        report = run_materialize(NOW, sync_calendars=False)
        assert report.overlapped and report.ok
        assert report.summary() == (
            "materialize: another run is still in progress; this one did nothing"
        )
        assert not SweepRun.objects.filter(sweep="materialize").exists()
        holder.execute(statements.MATERIALIZE_UNLOCK)
    finally:
        holder.close()
    assert run_materialize(NOW, sync_calendars=False).queued == 1


@pytest.mark.django_db
def test_a_run_cut_short_hands_over_to_the_next_which_starts_where_it_stopped(make_user, settings):
    users = [make_user() for _ in range(4)]
    settings.NUDGE_MATERIALIZE_BUDGET_SECONDS = 1e-9  # spent before the first user
    cut = run_materialize(NOW, sync_calendars=False)
    assert cut.cut_short and cut.users == 0 and "CUT SHORT" in cut.summary()
    # A run that stopped after the second user: the next starts with the third.
    SweepRun.objects.create(
        sweep="materialize",
        status="ok",
        as_of=NOW,
        counts={"cut_short": True, "resume_after": users[1].pk},
    )
    assert _resume_point() == users[1].pk
    order = list(users_to_visit(start_after=_resume_point()))
    assert order == [users[2].pk, users[3].pk, users[0].pk, users[1].pk]
