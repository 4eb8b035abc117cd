"""The pacer's reserve, locked in: it reads the budgets it names by their key, never the
whole ``channel_pacing`` table. The table holds a row per user budget (a Google account's
quota, a Graph mailbox's), and a sync makes most of them during its run, after the last
statistics: a hashed sequential scan would then read every budget on every request.
Plan shapes only, never timings."""

from __future__ import annotations

import pytest
from django.db import connection

from pacing import statements
from tests.plans.data import analyze, explain_json

USER_BUDGETS = 1_000


def _reserve_scans() -> list[str]:
    nodes = explain_json(
        statements.RESERVE_SLOTS,
        {
            "budgets": ["google", "google:account-77"],
            "ceilings": [50.0, 10.0],
            "bursts": [10, 5],
            "wanted": 1,
            "lead": "0 seconds",
            "horizon": "2 seconds",
            "growth": 0.01,
            "tau": 10.0,
        },
    )
    return [node["Node Type"] for node in nodes if node.get("Relation Name") == "channel_pacing"]


def _make_budgets() -> None:
    names = ["google", *(f"google:account-{n}" for n in range(USER_BUDGETS))]
    with connection.cursor() as cursor:
        cursor.execute(statements.ENSURE_PACING_ROWS, {"budgets": names})


@pytest.mark.parametrize("statistics", ["taken while empty", "taken after the run"])
def test_a_reserve_reads_its_budgets_by_key(transactional_db, statistics):
    if statistics == "taken while empty":
        analyze("channel_pacing")
        _make_budgets()
    else:
        _make_budgets()
        analyze("channel_pacing")
    scans = _reserve_scans()
    assert scans and "Seq Scan" not in scans, scans
