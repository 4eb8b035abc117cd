"""The minute job's statements on the push work list, locked in: with 20,000 live
connections and a hundred changed, each reads the rows it names by an index, never
the whole list (what a minute job costs must follow the changes, not the
connections). Plan shapes only, never timings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from calendars import statements
from calendars.push.worklist import CHANGE_LEASE
from tests.conftest import utc
from tests.plans.data import analyze, explain_json

NOW = utc(2026, 12, 2, 15, 0)
CONNECTIONS = 20_000
CHANGED = 100


@pytest.fixture
def work_list(transactional_db) -> list[int]:
    """20,000 live channels' rows (due for renewal over a week), 100 of them changed."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO calendar_push_work (connection_id, user_id, changed_at, maintain_at,"
            " polling, push_capable)"
            " SELECT g, g, CASE WHEN g %% 200 = 0 THEN %(now)s END,"
            " %(now)s + make_interval(secs => g * 30), false, true"
            " FROM generate_series(1, %(n)s) AS g",
            {"now": NOW, "n": CONNECTIONS},
        )
    analyze("calendar_push_work")
    return list(range(200, CONNECTIONS + 1, 200))


def _scans(nodes: list[dict]) -> list[tuple[str, str]]:
    return [
        (node["Node Type"], node.get("Index Name", ""))
        for node in nodes
        if node.get("Relation Name") == "calendar_push_work"
    ]


def test_settling_a_hundred_changes_reads_them_by_the_key(work_list):
    held = NOW + CHANGE_LEASE
    nodes = explain_json(
        statements.SETTLE_CHANGED,
        {
            "ids": work_list,
            "outcomes": ["done"] * CHANGED,
            "untils": [None] * CHANGED,
            "holds": [held] * CHANGED,
        },
    )
    scans = _scans(nodes)
    assert scans and all(kind != "Seq Scan" for kind, _ in scans), scans


def test_taking_the_changes_walks_the_change_index(work_list):
    nodes = explain_json(statements.TAKE_CHANGED, {"limit": 5000, "lease": timedelta(minutes=5)})
    scans = _scans(nodes)
    assert scans and all(kind != "Seq Scan" for kind, _ in scans), scans
