"""One deliver run issues a constant number of statements when nothing is due,
exactly one read per claimed row otherwise (its owner's settings and subject, in
the owner's scope), and queue writes in groups, far fewer than the rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from followups.models import FollowUp
from sweeps.deliver import run_deliver
from tenancy.scope import tenant_scope
from tests.conftest import utc
from tests.support.queue import queue_nudge

NOW = utc(2026, 12, 2, 15, 0)
# The one statement that reads a claimed row's facts (statements.RESOLVE_NUDGE).
RESOLVE_MARK = "FROM (VALUES (1)) AS one"


def _queue_due(make_user, count: int, round_no: int) -> None:
    for i in range(count):
        user = make_user(f"qc{round_no}-{i}")
        with tenant_scope(user.pk):
            follow_up = FollowUp.objects.create(
                user=user, title=f"Follow-up {i}", due_at=NOW + timedelta(minutes=10)
            )
        queue_nudge(
            user.pk,
            ref_id=follow_up.pk,
            at=NOW - timedelta(seconds=30),
            subject_starts_at=follow_up.due_at,
        )


def _statements_for_one_run() -> tuple[int, int, int, int]:
    """Statements in all, per-row reads, queue writes, and rows sent."""
    with CaptureQueriesContext(connection) as captured:
        report = run_deliver(NOW)
    sql = [q["sql"] for q in captured.captured_queries]
    reads = [q for q in sql if RESOLVE_MARK in q]
    writes = [q for q in sql if q.lstrip().startswith("UPDATE scheduled")]
    return len(sql), len(reads), len(writes), report.sent


@pytest.mark.django_db
def test_deliver_reads_once_per_row_and_writes_in_groups(make_user, recording_channel):
    idle, idle_reads, idle_writes, sent = _statements_for_one_run()
    assert (idle_reads, sent) == (0, 0)

    for round_no, n in enumerate((1, 10, 50), start=1):
        _queue_due(make_user, n, round_no)
        _, reads, writes, sent = _statements_for_one_run()
        assert sent == n
        assert reads == n  # one round trip per row, in its owner's scope
        # Claim, marks and settle-ups go by the group: 50 rows once cost 100 writes.
        assert writes <= 2 + n // 4, (n, writes)
    assert len(recording_channel.sent) == 61

    # And nothing due again: back to the constant.
    assert _statements_for_one_run() == (idle, 0, idle_writes, 0)
