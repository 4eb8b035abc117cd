"""The queue's plans over day partitions, at a million rows (issue 25, item 3).

1,000,000 rows over 10,000 tenants and four partitions: 900,000 sent over the
three days before now (the tail of the partition the migration attached, then
two day partitions and today's), 10,000 due and 90,000 ahead today. The
claim, the settle-ups and support's actions by id, a tenant's reads,
materialize's per-user read, a tenant's charts and ``/metrics``' 15 minutes keep
their index plans; everyone's 24-hour charts reach only the last day's
partitions (scanning most of a day whole may be the cheaper plan); and the
claim's plan holds only the days a due row can be in. Plan shapes only, never
timings.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection

from console import charts
from core.config import NudgeConfig
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import statements, transitions
from scheduled_sends.queue.partitions import DAY, partitions
from tenancy.scope import rls_bypass, support_scope, tenant_scope
from tests.plans.data import (
    analyze,
    explain_json,
    load_history,
    load_queue,
    make_users,
    plan_nodes,
    scans_below,
)

USERS = 10_000
DUE, FUTURE, HISTORY = 10_000, 90_000, 900_000


@pytest.fixture
def spread(transactional_db) -> tuple[datetime, list[int]]:
    """``now`` on the third day partition's afternoon, and the users; committed and analyzed."""
    first_day = next(part for part in partitions() if part.start is not None)
    now = first_day.start + 2 * DAY + timedelta(hours=15, minutes=7)
    user_ids = make_users(USERS, prefix="parts")
    load_queue(user_ids, now, due=DUE, future=FUTURE, settled=0)
    load_history(user_ids, now, HISTORY, days=3, first_ref=DUE + FUTURE + 1)
    analyze("scheduled_sends")
    return now, user_ids


def _partition_of(at: datetime) -> str:
    return next(p.name for p in partitions() if p.overlaps(at, at + timedelta(microseconds=1)))


def _holding_rows() -> set[str]:
    with support_scope(), connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM scheduled_sends")
        return {name for (name,) in cursor.fetchall()}


def _no_seq_scan(nodes: list[dict]) -> None:
    seq = [n.get("Partition Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    assert not seq, seq


def test_plans_over_day_partitions_at_a_million_rows(spread):
    """Issue 25, item 3: plan tests at one million rows over several partitions."""
    now, user_ids = spread
    today, tomorrow = _partition_of(now), _partition_of(now + DAY)
    assert len(_holding_rows()) == 4, _holding_rows()
    config = NudgeConfig.from_settings()

    # The claim: pruned while planning to today's and tomorrow's partitions, and
    # still an ordered walk of the due index that stops at LIMIT.
    params = transitions.claim_params(now, config)
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + statements.CLAIM_DUE, params)
        raw = plan_nodes(cursor.fetchone()[0])
        nodes = explain_json(statements.CLAIM_DUE, params)
    (cte,) = [n for n in raw if n.get("Subplan Name") == "CTE due"]
    in_claim = {n["Relation Name"] for n in plan_nodes({"Plan": cte}) if "Relation Name" in n}
    assert in_claim <= {today, tomorrow}, in_claim
    (limit,) = [n for n in nodes if n.get("Subplan Name") == "CTE due"]
    (lock_rows,) = limit["Plans"]
    assert lock_rows["Node Type"] == "LockRows"
    (below,) = lock_rows["Plans"]
    for scan in scans_below(below):
        assert (scan["Node Type"], scan["Index Name"]) == ("Index Scan", "scheduled_sends_due_idx")
    assert not [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    _no_seq_scan(nodes)

    # A settle-up names rows by (id, intended_at), support's actions by id
    # alone: every partition's primary key answers, led by id.
    with support_scope():
        rows = list(ScheduledSend.objects.order_by("-pk").values_list("pk", "intended_at")[:200])
    ids = [pk for pk, _ in rows]
    group = transitions._group_params([])  # the statement's nine arrays, empty
    group["ids"], group["intended_ats"] = ids, [at for _, at in rows]
    for key in ("tokens", "ats", "channels", "message_ids", "reasons", "not_befores"):
        group[key] = [None] * len(ids)
    group["failure_kinds"] = [""] * len(ids)
    with rls_bypass():
        nodes = explain_json(statements.SETTLE["MARK_SENDING"], group)
    # (A day whose rows are all settled may answer from an index of unsettled
    # rows instead — the statement's own condition — over an all but empty index.)
    used = {n.get("Index Name") for n in nodes if "Index Name" in n}
    assert "scheduled_sends_pkey" in used, nodes
    assert used <= {"scheduled_sends_pkey", "scheduled_sends_due_idx", "sends_user_pending_idx"}
    _no_seq_scan(nodes)
    with support_scope():
        nodes = explain_json("UPDATE scheduled_sends SET last_error = '' WHERE id = %s", [ids[0]])
    assert {n.get("Index Name") for n in nodes if "Index Name" in n} == {"scheduled_sends_pkey"}
    _no_seq_scan(nodes)

    # A tenant's policy-only read, and materialize's read of the user's pending rows.
    tenant = user_ids[4242]
    with tenant_scope(tenant):
        nodes = explain_json("SELECT count(*) FROM scheduled_sends")
        assert {n.get("Index Name") for n in nodes if "Index Name" in n} == {
            "scheduled_sends_nudge_uniq"
        }
        _no_seq_scan(nodes)
        pending = ScheduledSend.objects.filter(
            user_id=tenant,
            sent_at__isnull=True,
            outcome__isnull=True,
            intended_at__gt=now - config.grace,
        ).values_list("id", "kind", "ref_id", "intended_at", "fire_at")
        sql, sql_params = pending.query.sql_with_params()
        nodes = explain_json(sql, sql_params)
    assert [n.get("Index Name") for n in nodes if "Index Name" in n] == ["sends_user_pending_idx"]
    assert {n["Partition Name"] for n in nodes if "Partition Name" in n} == {today}

    # The console's charts: through an index; history only from the last day's partitions.
    minute = charts.floor_to(now, timedelta(minutes=1))
    quarter_end = charts.floor_to(now, charts.QUARTER) + charts.QUARTER
    hour_end = charts.floor_to(now, timedelta(hours=1)) + timedelta(hours=1)
    history = quarter_end - charts.HISTORY
    for who in (None, tenant):
        queries = {
            "look-ahead": charts.look_ahead_query(minute, who),
            "lateness": charts.lateness_query(history, quarter_end, config, who),
            "histogram": charts.histogram_query(history, quarter_end, config, who),
            "outcomes": charts.outcomes_query(hour_end - charts.HISTORY, hour_end, config, who),
        }
        for name, queryset in queries.items():
            with support_scope():
                sql, sql_params = queryset.query.sql_with_params()
                nodes = explain_json(sql, sql_params)
            if who is None and name != "look-ahead":
                # Everyone's last 24 hours is most of a day partition's rows: scanning
                # those (and only those) whole can be the cheaper plan, and the planner
                # may take it. What must hold is below: older days are pruned away.
                pass
            else:
                _no_seq_scan(nodes)
                assert [n for n in nodes if "Index Name" in n], (who, name)
            if name != "look-ahead":  # by intended instant: older days are pruned away
                touched = {n["Partition Name"] for n in nodes if "Partition Name" in n}
                assert touched <= {_partition_of(now - DAY), today}, (who, touched)
            else:  # by fire minute, over live rows: each day's due index, all but empty
                assert {n["Index Name"] for n in nodes if "Index Name" in n} <= {
                    "scheduled_sends_due_idx",
                    "sends_user_pending_idx",
                    "scheduled_sends_nudge_uniq",
                }, (who, nodes)

    # /metrics' lateness by channel: everyone's last 15 minutes, a sliver of today's
    # partition, through the settled rows' index.
    with rls_bypass():
        sql, sql_params = (
            charts.histogram_query(now - timedelta(minutes=15), now, config)
            .order_by()
            .query.sql_with_params()
        )
        nodes = explain_json(sql, sql_params)
    _no_seq_scan(nodes)
    assert "scheduled_sends_settled_idx" in {n.get("Index Name") for n in nodes}, nodes
    assert {n["Partition Name"] for n in nodes if "Partition Name" in n} <= {
        _partition_of(now - DAY),
        today,
    }
