"""Bulk, set-based test data for plan assertions.

Rows are written the way a support operator could write them: one
``INSERT … SELECT generate_series`` under ``support_scope()``, so the data
passes through the same row-level security as everything else. The point is
size, not realism of content: the planner needs enough rows to prefer an
index only where the index really is the better plan.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.db import connection

from bench import data as bench_data
from bench.data import replicate
from tenancy.owner import connected_as_owner
from tenancy.scope import support_scope


def make_users(count: int, prefix: str = "plan") -> list[int]:
    """``count`` plain users (``auth_user`` is not a tenant table); their ids."""
    return bench_data.make_users(count, prefix)


def load_queue(user_ids: list[int], now: datetime, *, due: int, future: int, settled: int) -> None:
    """Queue rows spread round-robin over ``user_ids``.

    ``due`` pending rows fell due within the last ten minutes, ``future``
    pending rows fire over the next three hours, ``settled`` rows were sent
    yesterday. ``ref_id`` runs on across the three, so the unique key holds.
    """
    batches = [
        (due, now - _minutes(10), _minutes(10), False),
        (future, now + _minutes(1), _minutes(180), False),
        (settled, now - _minutes(24 * 60), _minutes(60), True),
    ]
    first = 1
    for count, start, span, is_settled in batches:
        if count:
            bench_data.queue_synthetic(
                user_ids, count, start=start, span=span, first_ref=first, settled=is_settled
            )
            first += count


def load_history(
    user_ids: list[int], now: datetime, count: int, *, days: int, first_ref: int
) -> None:
    """``count`` sent rows spread evenly over the ``days`` before ``now``: the
    settled history retention keeps, which the console's charts must not walk."""
    bench_data.queue_synthetic(
        user_ids,
        count,
        start=now - timedelta(days=days),
        span=timedelta(days=days),
        first_ref=first_ref,
        settled=True,
    )


def analyze(*tables: str) -> None:
    """Statistics for the planner; only the owner role may gather them.

    With the data committed (a ``transactional_db`` test) the owner does it on
    a connection of its own; inside a test's transaction nobody else can see
    the rows, so the login role asks, and PostgreSQL skips the tables with a
    warning: plan tests that depend on statistics must commit their data.
    """
    if connection.in_atomic_block:
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"ANALYZE {table}")
        return
    with connected_as_owner(), connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"ANALYZE {table}")


def _minutes(n: int) -> timedelta:
    return timedelta(minutes=n)


def plan_nodes(plan: object) -> list[dict]:
    """Every node of an EXPLAIN (FORMAT JSON) result, depth first."""
    if isinstance(plan, str):
        plan = json.loads(plan)
    if isinstance(plan, list):
        plan = plan[0]
    root = plan["Plan"] if "Plan" in plan else plan
    nodes, stack = [], [root]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed(node.get("Plans", [])))
    return nodes


# Partitions and their indexes, each with its parent's name.
_PARENTS = """
SELECT c.relname, p.relname, c.relkind = 'r' AND pg_relation_size(c.oid) = 0
  FROM pg_inherits AS i
  JOIN pg_class AS c ON c.oid = i.inhrelid
  JOIN pg_class AS p ON p.oid = i.inhparent
"""


def explain_json(sql: str, params: object = None) -> list[dict]:
    """The plan's nodes, each partition's scan named by its parent (``named_by_parent``)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        return named_by_parent(plan_nodes(cursor.fetchone()[0]))


def named_by_parent(nodes: list[dict]) -> list[dict]:
    """Plan nodes with a partition's scan named by its parent table and index.

    The queue is partitioned by day (issue 25): PostgreSQL names each
    partition's own index in a plan, and its name is the partition's. The
    original is kept as ``Partition Name`` / ``Partition Index``. A scan of a
    partition that has never held a row is left out: reading an empty table
    is free either way, and the planner, rightly, often does it sequentially.
    """
    with connection.cursor() as cursor:
        cursor.execute(_PARENTS)
        rows = cursor.fetchall()
    parent = {name: parent for name, parent, _ in rows}
    empty = {name for name, _, is_empty in rows if is_empty}
    for node in nodes:
        if node.get("Relation Name") in parent:
            node["Partition Name"] = node["Relation Name"]
            node["Relation Name"] = parent[node["Relation Name"]]
        if node.get("Index Name") in parent:
            node["Partition Index"] = node["Index Name"]
            node["Index Name"] = parent[node["Index Name"]]
    return [node for node in nodes if node.get("Partition Name") not in empty]


def scans_below(node: dict) -> list[dict]:
    """The scans a node reads, through any Append or Merge Append over partitions."""
    if node["Node Type"] in ("Append", "Merge Append"):
        return [scan for child in node["Plans"] for scan in scans_below(child)]
    return [node]


def _one_connection_each(user_ids: list[int]) -> None:
    from calendars.models import CalendarConnection, Provider

    CalendarConnection.objects.bulk_create(
        [CalendarConnection(user_id=u, provider=Provider.ICS, account="plan") for u in user_ids],
        batch_size=2000,
    )


def load_events(user_ids: list[int], now: datetime, *, per_user: int, span: timedelta) -> None:
    """One ICS connection per user and ``per_user`` events each, evenly over
    ``span`` centred on ``now``: a calendar keeps its history, and the
    materializer's window is a day and a bit of it."""
    from calendars.models import CalendarEvent

    with support_scope():
        _one_connection_each(user_ids)
        template = CalendarEvent.objects.create(
            user_id=user_ids[0],
            connection=_connection_of(user_ids[0]),
            provider_event_id="plan-template",
            title="Design review",
            starts_at=now - span,
        )
        replicate(
            CalendarEvent,
            template.pk,
            overrides={
                "user_id": "c.user_id",
                "connection_id": "c.id",
                "provider_event_id": "'plan-' || g",
                "starts_at": "x.at",
                "ends_at": "x.at + interval '30 minutes'",
            },
            source="""generate_series(0, %(total)s - 1) AS g
                JOIN calendar_connections AS c
                  ON c.user_id = (%(ids)s::bigint[])[1 + mod(g, %(users)s)],
                LATERAL (SELECT %(start)s::timestamptz
                                + %(span)s::interval * (g / %(users)s) / %(per_user)s) AS x(at)""",
            params=_spread_params(user_ids, now, per_user, span),
        )


def load_follow_ups(user_ids: list[int], now: datetime, *, per_user: int, span: timedelta) -> None:
    """``per_user`` follow-ups each, evenly over ``span``; every fourth is done."""
    from followups.models import FollowUp

    with support_scope():
        template = FollowUp.objects.create(
            user_id=user_ids[0], title="Call back", due_at=now - span
        )
        replicate(
            FollowUp,
            template.pk,
            overrides={
                "user_id": "(%(ids)s::bigint[])[1 + mod(g, %(users)s)]",
                "due_at": "%(start)s::timestamptz"
                " + %(span)s::interval * (g / %(users)s) / %(per_user)s",
                "done": "mod(g / %(users)s, 4) = 0",
            },
            source="generate_series(0, %(total)s - 1) AS g",
            params=_spread_params(user_ids, now, per_user, span),
        )


def _connection_of(user_id: int):
    from calendars.models import CalendarConnection

    return CalendarConnection.objects.filter(user_id=user_id).first()


def _spread_params(user_ids, now, per_user, span) -> dict:
    return {
        "ids": user_ids,
        "users": len(user_ids),
        "per_user": per_user,
        "total": per_user * len(user_ids),
        "start": now - span / 2,
        "span": span,
    }
