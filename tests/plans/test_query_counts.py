"""One deliver run issues a constant number of statements when nothing is due,
and exactly that plus a fixed number per claimed row otherwise."""

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
# Generous, but finite: what one row may cost, savepoints and scope settings included.
MAX_STATEMENTS_PER_ROW = 20


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


def _statements_for_one_run() -> tuple[int, int]:
    with CaptureQueriesContext(connection) as captured:
        report = run_deliver(NOW)
    return len(captured.captured_queries), report.sent


@pytest.mark.django_db
def test_deliver_statements_are_a_plus_b_times_rows(make_user, recording_channel):
    idle, sent = _statements_for_one_run()
    assert sent == 0

    counts = {}
    for round_no, n in enumerate((1, 10, 50), start=1):
        _queue_due(make_user, n, round_no)
        counts[n], sent = _statements_for_one_run()
        assert sent == n
    per_row = counts[1] - idle
    assert 0 < per_row <= MAX_STATEMENTS_PER_ROW
    assert counts == {n: idle + per_row * n for n in (1, 10, 50)}, (idle, per_row, counts)
    assert len(recording_channel.sent) == 61

    # And nothing due again: back to the constant.
    assert _statements_for_one_run() == (idle, 0)
