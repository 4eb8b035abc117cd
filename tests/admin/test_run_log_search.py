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


def test_run_page_title_states_its_zone_and_counts_are_a_table(staff_client):
    """issue 33: a run's title mixed zones (UTC written without a zone beside fields in
    the viewer's zone) and its counts were raw JSON."""
    run = SweepRun.objects.create(
        sweep=SweepRun.Sweep.DELIVER,
        status=SweepRun.Status.OK,
        as_of=NOW,
        counts={"sent": 3, "failed": 0, "lateness": {"p50_seconds": 4, "max_seconds": 61}},
    )
    started = datetime(2026, 12, 4, 18, 26, 32, tzinfo=UTC)
    SweepRun.objects.filter(pk=run.pk).update(started_at=started)

    response = staff_client.get(f"/admin/scheduled_sends/sweeprun/{run.pk}/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "deliver ok at 2026-12-04 18:26:32 UTC" in page
    assert "18:26:32</time></h2>" not in page and "18:26:32 UTC</time></h2>" in page
    assert '"sent"' not in page and "{&quot;" not in page and "&quot;sent&quot;" not in page
    assert '<th scope="row">sent</th><td>3</td>' in page
    # A nested count's row is named by its path.
    assert '<tr><th scope="row">lateness.p50_seconds</th><td>4</td></tr>' in page
    assert '<tr><th scope="row">lateness.max_seconds</th><td>61</td></tr>' in page
