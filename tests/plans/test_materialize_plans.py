"""The materializer's two per-user reads use their indexes: a user's events by
start time, and a user's open follow-ups by due time (and the repeating ones by
their own partial index).

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
from calendars.models import CalendarEvent, ConnectionStatus, FollowUp
from core.config import NudgeConfig
from scheduled_sends.materialize import plan_for_user
from scheduled_sends.models import ScheduledSend
from tenancy.scope import support_scope, tenant_scope
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


def _querysets(user_id: int):
    """The querysets ``plan_for_user`` builds (checked against it below)."""
    config = NudgeConfig.from_settings()
    start, end = config.subject_window(NOW)
    events = CalendarEvent.objects.filter(
        user_id=user_id, starts_at__gt=start, starts_at__lte=end
    ).exclude(connection__status=ConnectionStatus.NEEDS_REAUTH)
    open_follow_ups = FollowUp.objects.filter(user_id=user_id, done=False, due_at__lte=end)
    follow_ups = (
        open_follow_ups.filter(repeat="", due_at__gt=start)
        .order_by()
        .union(open_follow_ups.exclude(repeat="").order_by(), all=True)
    )
    return events, follow_ups


def _ran_by_plan_for_user(user_id: int) -> list[str]:
    with tenant_scope(user_id):
        with CaptureQueriesContext(connection) as captured:
            delivery = DeliverySettings.objects.get(user_id=user_id)
            plan_for_user(user_id, delivery, NOW, NudgeConfig.from_settings())
    return [q["sql"] for q in captured.captured_queries]


def _where(sql: str) -> str:
    return sql.split(" WHERE ", 1)[1]


@pytest.mark.django_db(transaction=True)  # committed, so the owner can analyze (data.analyze)
def test_event_read_uses_the_user_start_index():
    user_ids = _users_with_settings()
    load_events(user_ids, NOW, per_user=PER_USER, span=HISTORY)
    analyze("calendar_events", "calendar_connections")
    user_id = user_ids[7]
    events, _ = _querysets(user_id)
    with tenant_scope(user_id):
        nodes = plan_nodes(events.explain(format="json"))
        sql = str(events.query)
        found = len(list(events))

    # The queryset here is the one plan_for_user runs (same WHERE, same joins).
    ran = [q for q in _ran_by_plan_for_user(user_id) if 'FROM "calendar_events"' in q]
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
    _, follow_ups = _querysets(user_id)
    with tenant_scope(user_id):
        nodes = plan_nodes(follow_ups.explain(format="json"))
        sql = str(follow_ups.query)
        found = len(list(follow_ups))

    ran = [q for q in _ran_by_plan_for_user(user_id) if 'FROM "follow_ups"' in q]
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
    with tenant_scope(user_id):
        pending = ScheduledSend.objects.filter(
            user_id=user_id,
            sent_at__isnull=True,
            outcome__isnull=True,
            intended_at__gt=NOW - timedelta(minutes=15),
        ).values_list("id", "kind", "ref_id", "intended_at", "fire_at")
        nodes = named_by_parent(plan_nodes(pending.explain(format="json")))
    scans = [n.get("Index Name") for n in nodes if "Index Name" in n]
    assert scans == ["sends_user_pending_idx"], nodes
