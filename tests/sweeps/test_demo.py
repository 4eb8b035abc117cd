"""The README's first command: demo data, one materialize, one deliver."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.conftest import utc

START = utc(2026, 12, 2, 8, 0)


def test_the_demo_has_something_to_say_and_says_it_once(db, recording_channel, capsys):
    call_command("seed_demo", "--users", "3", "--due-now", "1", "--start", START.isoformat())
    assert "seed_demo: 3 new users, 12 events, 6 follow-ups" in capsys.readouterr().out
    report = run_materialize(START)
    # Demo calendars are local: nothing to sync, nothing failing.
    assert (report.failed_users, report.calendars_failed, report.provider_calls) == (0, 0, 0)
    assert report.queued == 18
    delivered = run_deliver(START)
    assert (delivered.claimed, delivered.sent) == (3, 3)
    assert [m.text for m in recording_channel.sent] == [
        "Reminder: Demo: check in (1) is due at 08:10 (in 10 min)"
    ] * 3
    # Running the demo again adds nothing.
    call_command("seed_demo", "--users", "3", "--due-now", "1", "--start", START.isoformat())
    assert run_materialize(START + timedelta(minutes=1)).queued == 0


def test_seed_demo_refuses_negative_counts(db):
    with pytest.raises(CommandError, match="argument --users: '-1' cannot be negative"):
        call_command("seed_demo", "--users", "-1")
