"""The support console's chart queries use indexes at 1,000,000 rows.

A million rows over 10,000 tenants: 900,000 sent over the last 30 days (the
history retention keeps), 10,000 due, 90,000 planned over the next three
hours. Each chart query must reach its window through an index, for everyone
(the landing page, under the support role's policy) and for one user (their
page), and never read the table through. Plan shapes only, never timings.
"""

from __future__ import annotations

import pytest

from console import charts
from core.config import NudgeConfig
from tenancy.scope import support_scope
from tests.conftest import utc
from tests.plans.data import analyze, explain_json, load_history, load_queue, make_users

NOW = utc(2026, 12, 2, 15, 7)
USERS = 10_000
DUE, FUTURE, HISTORY = 10_000, 90_000, 900_000


@pytest.fixture
def million(transactional_db) -> list[int]:
    # Committed, so the owner role can gather statistics (see data.analyze).
    user_ids = make_users(USERS, prefix="console")
    load_queue(user_ids, NOW, due=DUE, future=FUTURE, settled=0)
    load_history(user_ids, NOW, HISTORY, days=30, first_ref=DUE + FUTURE + 1)
    analyze("scheduled_sends")
    return user_ids


def _queries(user_id: int | None) -> dict[str, object]:
    minute = charts.floor_to(NOW, charts.timedelta(minutes=1))
    quarter_end = charts.floor_to(NOW, charts.QUARTER) + charts.QUARTER
    hour_end = charts.floor_to(NOW, charts.timedelta(hours=1)) + charts.timedelta(hours=1)
    config = NudgeConfig.from_settings()
    return {
        "look-ahead": charts.look_ahead_query(minute, user_id),
        "lateness": charts.lateness_query(
            quarter_end - charts.HISTORY, quarter_end, config, user_id
        ),
        "histogram": charts.histogram_query(
            quarter_end - charts.HISTORY, quarter_end, config, user_id
        ),
        "outcomes": charts.outcomes_query(hour_end - charts.HISTORY, hour_end, config, user_id),
    }


def _scans(queryset) -> list[tuple[str, str | None]]:
    sql, params = queryset.query.sql_with_params()
    nodes = explain_json(sql, params)
    return [
        (node["Node Type"], node.get("Index Name"))
        for node in nodes
        if node.get("Relation Name") == "scheduled_sends" or "Index Name" in node
    ]  # a Bitmap Heap Scan names no index; its Bitmap Index Scan child does


def test_chart_queries_reach_their_window_through_an_index(million):
    tenant = million[4242]
    with support_scope():
        plans = {
            f"{who} {name}": _scans(queryset)
            for who, user_id in (("everyone", None), ("one user", tenant))
            for name, queryset in _queries(user_id).items()
        }

    for name, scans in plans.items():
        assert not [scan for scan in scans if scan[0] == "Seq Scan"], (name, scans)
    indexes = {name: {index for _, index in scans if index} for name, scans in plans.items()}
    # Everyone: the live rows' partial index (all of it is the next few hours),
    # and the settled rows' index on fire_at, walked for the last day only.
    assert indexes["everyone look-ahead"] == {"scheduled_sends_due_idx"}
    for chart in ("lateness", "histogram", "outcomes"):
        # Since the primary key is (id, intended_at) (issue 25), the planner may
        # AND in its intended_at range; the settled index still bounds the walk,
        # and on a partitioned queue the same range prunes whole days away.
        assert "scheduled_sends_settled_idx" in indexes[f"everyone {chart}"], chart
        assert indexes[f"everyone {chart}"] <= {
            "scheduled_sends_settled_idx",
            "scheduled_sends_pkey",
        }, chart
        # One user: their rows through the user_id-led index (a user's history is small).
        assert indexes[f"one user {chart}"] == {"scheduled_sends_nudge_uniq"}, chart
    # A user's look-ahead: their rows' indexes (all of them, or only the live
    # ones), or the live rows' (the next hours only), or these AND-ed; whichever
    # the planner prices lower, never the table.
    assert indexes["one user look-ahead"]
    assert indexes["one user look-ahead"] <= {
        "scheduled_sends_nudge_uniq",
        "sends_user_pending_idx",
        "scheduled_sends_due_idx",
    }
