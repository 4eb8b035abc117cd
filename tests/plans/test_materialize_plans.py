"""The materializer's reads use their indexes, for one user (``tenant_scope``) and
for a set planned together (``planning_scope``): events by start time, open
follow-ups by due time (and the repeating ones by their own partial index),
pending rows by the per-user index.

The data keeps a calendar's history (400 events and 400 follow-ups a user over
120 days, ~4 of each inside the ~27-hour window). With only a few dozen events
per connection the planner may drive the event read from the connection's
foreign-key index instead — as cheap at that size, but O(the user's history);
the window index is what keeps the read O(the window)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from sweeps.replan import read_subjects, subject_reads
from tenancy.scope import planning_scope, support_scope, tenant_scope
from tests.conftest import utc
from tests.plans.data import (
    analyze,
    load_events,
    load_follow_ups,
    load_queue,
    make_users,
    named_by_parent,
    plan_nodes,
)

NOW = utc(2026, 12, 2, 15, 0)
USERS = 500
PER_USER = 400
HISTORY = timedelta(days=120)


def _users_with_settings() -> list[int]:
    user_ids = make_users(USERS, prefix="planmat")
    with support_scope():
        DeliverySettings.objects.bulk_create(
            [DeliverySettings(user_id=u, channel="console") for u in user_ids]
        )
    return user_ids


def _ran_by_planning(user_id: int) -> list[str]:
    with tenant_scope(user_id):
        with CaptureQueriesContext(connection) as captured:
            read_subjects([user_id], NOW, NudgeConfig.from_settings())
    return [q["sql"] for q in captured.captured_queries]


def _where(sql: str) -> str:
    return sql.split(" WHERE ", 1)[1]


@pytest.mark.django_db(transaction=True)  # committed, so the owner can analyze (data.analyze)
def test_event_read_uses_the_user_start_index():
    user_ids = _users_with_settings()
    load_events(user_ids, NOW, per_user=PER_USER, span=HISTORY)
    analyze("calendar_events", "calendar_connections")
    user_id = user_ids[7]
    events = subject_reads([user_id], NOW, NudgeConfig.from_settings())["events"]
    with tenant_scope(user_id):
        nodes = plan_nodes(events.explain(format="json"))
        sql = str(events.query)
        found = len(list(events))

    # The queryset here is the one planning runs (same WHERE, same joins).
    ran = [q for q in _ran_by_planning(user_id) if 'FROM "calendar_events"' in q]
    assert len(ran) == 1 and _where(ran[0]).count("AND") == _where(sql).count("AND")
    assert 0 < found < PER_USER // 10

    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"]
    window = [n for n in nodes if n.get("Index Name") == "calendar_events_user_start_idx"]
    assert window, nodes
    assert "starts_at >" in window[0]["Index Cond"]  # bounded by the window, not the history


@pytest.mark.django_db(transaction=True)  # committed, so the owner can analyze (data.analyze)
def test_follow_up_read_uses_the_open_due_index():
    user_ids = _users_with_settings()
    load_follow_ups(user_ids, NOW, per_user=PER_USER, span=HISTORY)
    analyze("follow_ups")
    user_id = user_ids[11]
    follow_ups = subject_reads([user_id], NOW, NudgeConfig.from_settings())["follow_ups"]
    with tenant_scope(user_id):
        nodes = plan_nodes(follow_ups.explain(format="json"))
        sql = str(follow_ups.query)
        found = len(list(follow_ups))

    ran = [q for q in _ran_by_planning(user_id) if 'FROM "follow_ups"' in q]
    assert len(ran) == 1 and _where(ran[0]).count("AND") == _where(sql).count("AND")
    assert 0 < found < PER_USER // 10

    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"]
    open_due = [n for n in nodes if n.get("Index Name") == "follow_ups_open_due_idx"]
    assert open_due, nodes
    assert "due_at >" in open_due[0]["Index Cond"]
    # Repeating follow-ups (issue 24) are read through their own small partial index.
    assert [n for n in nodes if n.get("Index Name") == "follow_ups_open_repeating_idx"], nodes


@pytest.mark.django_db(transaction=True)  # committed, so the owner can analyze (data.analyze)
def test_pending_read_uses_the_user_index():
    """Materialize reads one user's pending rows: through the per-user index, never by
    walking every tenant's live rows in the claim's index."""
    user_ids = make_users(1_000, prefix="pendplan")
    load_queue(user_ids, NOW, due=2_000, future=40_000, settled=0)
    analyze("scheduled_sends")
    user_id = user_ids[123]
    pending = subject_reads([user_id], NOW, NudgeConfig.from_settings())["pending"]
    with tenant_scope(user_id):
        nodes = named_by_parent(plan_nodes(pending.explain(format="json")))
    scans = [n.get("Index Name") for n in nodes if "Index Name" in n]
    assert scans == ["sends_user_pending_idx"], nodes


@pytest.mark.django_db(transaction=True)  # committed, so the owner can analyze (data.analyze)
def test_a_set_planned_together_reads_through_the_same_indexes():
    """``planning_scope``: 200 users' subjects and queue in one statement each, every
    one through the index its one-user read uses, none by walking the table."""
    user_ids = _users_with_settings()
    load_events(user_ids, NOW, per_user=PER_USER // 4, span=HISTORY)
    load_follow_ups(user_ids, NOW, per_user=PER_USER // 4, span=HISTORY)
    load_queue(user_ids, NOW, due=2_000, future=40_000, settled=0)
    analyze("calendar_events", "calendar_connections", "follow_ups", "scheduled_sends")
    together = user_ids[100:300]
    reads = subject_reads(together, NOW, NudgeConfig.from_settings())
    with planning_scope(together):
        plans = {
            name: named_by_parent(plan_nodes(reads[name].explain(format="json")))
            for name in ("events", "follow_ups", "pending")
        }
        found = read_subjects(together, NOW, NudgeConfig.from_settings())
    assert all(found[user_id].events for user_id in together[:20])
    big = ("calendar_events", "follow_ups", "scheduled_sends")  # (500 connections may be walked)
    for name, nodes in plans.items():
        walked = [n for n in nodes if n["Node Type"] == "Seq Scan"]
        assert not [n for n in walked if n["Relation Name"].startswith(big)], (name, nodes)
    indexes = {name: {n.get("Index Name") for n in nodes} for name, nodes in plans.items()}
    assert "calendar_events_user_start_idx" in indexes["events"], plans["events"]
    assert {"follow_ups_open_due_idx", "follow_ups_open_repeating_idx"} <= indexes["follow_ups"]
    assert indexes["pending"] - {None} == {"sends_user_pending_idx"}, plans["pending"]
