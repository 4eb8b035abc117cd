"""Support finds one materialize cycle, and one machine's runs, in the run log.

Several machines run the same cron line; each run's record names the cycle it
took part in (its summary) and itself (``participant``: host and process id,
as the cycle's slices name their holder).
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest

from scheduled_sends.models import SweepRun
from sweeps.cycle import participant_name
from sweeps.materialize import run_materialize

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 2, 14, 47, tzinfo=UTC)


def listed(staff_client, query: str) -> str:
    response = staff_client.get("/admin/scheduled_sends/sweeprun/", {"q": query})
    assert response.status_code == 200
    return response.content.decode()


def test_a_cycle_and_a_machine_are_found_by_search(staff_client, make_user):
    make_user()
    run_materialize(NOW, sync_calendars=False)
    run_materialize(NOW + timedelta(minutes=15), sync_calendars=False)

    runs = SweepRun.objects.filter(sweep=SweepRun.Sweep.MATERIALIZE).order_by("as_of")
    assert [run.counts["participant"] for run in runs] == [participant_name()] * 2

    page = listed(staff_client, "cycle 14:45Z")
    assert "cycle 14:45Z" in page and "cycle 15:00Z" not in page
    assert "cycle 15:00Z" in listed(staff_client, socket.gethostname())
    assert "cycle 14:45Z" not in listed(staff_client, "no-such-host:1")
