"""The figures code reads back from the run log are named once, as typed fields."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduled_sends.runlog import DeliverCounts, MaterializeCounts
from sweeps.deliver import DeliverReport
from sweeps.materialize import MaterializeReport


def test_a_deliver_report_writes_what_health_reads_back():
    report = DeliverReport(as_of=datetime(2026, 12, 2, tzinfo=UTC), sent=2, expired=1)
    report.latenesses = [3.0, 40.0]
    counts = DeliverCounts.from_counts(report.as_dict())
    assert (counts.sent, counts.expired) == (2, 1)
    assert sum(n for _, n in counts.lateness_histogram) == 2


def test_a_materialize_report_writes_what_health_reads_back():
    report = MaterializeReport(as_of=datetime(2026, 12, 2, tzinfo=UTC))
    report.overdue_unclaimed, report.cut_short = 3, True
    assert MaterializeCounts.from_counts(report.as_dict()) == MaterializeCounts(3, True)


def test_an_older_or_empty_entry_reads_as_zeros():
    assert DeliverCounts.from_counts({}) == DeliverCounts()
    assert MaterializeCounts.from_counts(None) == MaterializeCounts()
    assert MaterializeCounts.from_counts({"cut_short": True}).overdue_unclaimed == 0
