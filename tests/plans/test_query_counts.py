"""One deliver run issues a constant number of statements when nothing is due,
that plus a fixed number of *reads* per claimed row otherwise, and a number of
queue writes that does not grow with the rows: marks and settle-ups are grouped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from calendars.models import FollowUp
from scheduled_sends.deliver import run_deliver
from scheduled_sends.models import Kind, ScheduledSend
from tenancy.scope import tenant_scope
from tests.conftest import utc

NOW = utc(2026, 12, 2, 15, 0)
# What one row may cost: entering its owner's scope, then one read of settings and subject.
MAX_STATEMENTS_PER_ROW = 2


def _queue_due(make_user, count: int, round_no: int) -> None:
    for i in range(count):
        user = make_user(f"qc{round_no}-{i}")
        with tenant_scope(user.pk):
            follow_up = FollowUp.objects.create(
                user=user, title=f"Follow-up {i}", due_at=NOW + timedelta(minutes=10)
            )
            ScheduledSend.objects.create(
                user=user,
                kind=Kind.FOLLOW_UP,
                ref_id=follow_up.pk,
                fire_at=NOW - timedelta(seconds=30),
                subject_starts_at=follow_up.due_at,
            )


def _statements_for_one_run() -> tuple[int, int, int]:
    """Statements in all, queue writes among them, and rows sent."""
    with CaptureQueriesContext(connection) as captured:
        report = run_deliver(NOW)
    writes = [
        q for q in captured.captured_queries if q["sql"].lstrip().startswith("UPDATE scheduled")
    ]
    return len(captured.captured_queries), len(writes), report.sent


@pytest.mark.django_db
def test_deliver_statements_are_a_plus_b_times_rows(make_user, recording_channel):
    idle, idle_writes, sent = _statements_for_one_run()
    assert sent == 0

    counts, writes = {}, {}
    for round_no, n in enumerate((1, 10, 50), start=1):
        _queue_due(make_user, n, round_no)
        counts[n], writes[n], sent = _statements_for_one_run()
        assert sent == n
    per_row = (counts[50] - counts[10]) // 40
    assert 0 < per_row <= MAX_STATEMENTS_PER_ROW
    assert counts[50] - counts[10] == 40 * per_row, counts
    assert counts[10] - counts[1] == 9 * per_row, counts
    # Marking and settling 50 rows costs the statements that 1 row costs.
    assert writes[1] == writes[10] == writes[50], writes
    assert len(recording_channel.sent) == 61

    # And nothing due again: back to the constant.
    assert _statements_for_one_run() == (idle, idle_writes, 0)
