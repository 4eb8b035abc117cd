"""Materialise split over several processes queues what one process would, once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduled_sends.materialize import run_materialize
from scheduled_sends.models import SweepRun
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
