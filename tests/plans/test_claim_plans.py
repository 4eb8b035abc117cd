"""The queue's plans, locked in: the claim walks the partial index and stops
after LIMIT rows, whatever the number of tenants; a tenant's read walks the
``user_id`` index. Plan shapes only, never timings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from core.config import NudgeConfig
from scheduled_sends.queue import statements, transitions
from tenancy.scope import rls_bypass, tenant_scope
from tests.conftest import utc
from tests.plans.data import (
    analyze,
    explain_json,
    load_queue,
    make_users,
    scans_below,
)

NOW = utc(2026, 12, 2, 15, 0)
USERS = 1000
DUE = 10_000
FUTURE = 90_000
SETTLED = 20_000


def _claim_params() -> dict[str, object]:
    return transitions.claim_params(NOW, NudgeConfig.from_settings())


@pytest.fixture(scope="class")
def big_queue(django_db_setup, django_db_blocker) -> Iterator[list[int]]:
    """120,000 rows over 1,000 tenants: 10,000 due, 90,000 ahead, 20,000 settled.

    Made once for the tests that only read it, committed (so the owner can
    analyze, see data.analyze), and flushed after the last of them, as a
    transactional test's own rows are.
    """
    with django_db_blocker.unblock():
        try:
            user_ids = make_users(USERS)
            load_queue(user_ids, NOW, due=DUE, future=FUTURE, settled=SETTLED)
            analyze("scheduled_sends")
            yield user_ids
        finally:
            call_command("flush", interactive=False, verbosity=0)


@pytest.mark.django_db
class TestOverABigQueue:
    """Plans over a queue of 120,000 rows; each test reads, none writes."""

    def test_claim_walks_the_due_index_and_stops_at_limit(self, big_queue):
        with rls_bypass():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_user, row_security_active('scheduled_sends'), "
                    "(SELECT count(*) FROM scheduled_sends WHERE outcome IS NULL "
                    "AND fire_at <= %s)",
                    [NOW],
                )
                role, rls_active, visible_due = cursor.fetchone()
            nodes = explain_json(statements.CLAIM_DUE, _claim_params())

        # The plan below is the plan under the sweeper's policy, not a superuser's.
        assert role == settings.NUDGE_DB_SWEEPER_ROLE
        assert rls_active is True
        assert visible_due == DUE  # every tenant's due rows, through the policy

        cte = [node for node in nodes if node.get("Subplan Name") == "CTE due"]
        assert len(cte) == 1, nodes
        limit = cte[0]
        assert limit["Node Type"] == "Limit"
        (lock_rows,) = limit["Plans"]
        assert lock_rows["Node Type"] == "LockRows"
        (below,) = lock_rows["Plans"]
        # One day partition's due index (or, around midnight, a Merge Append of two).
        scans = scans_below(below)
        assert scans, below
        for scan in scans:
            assert scan["Node Type"] == "Index Scan"
            assert scan["Index Name"] == "scheduled_sends_due_idx"
            assert scan["Scan Direction"] == "Forward"  # fire_at order straight off the index

        assert not [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
        assert not [
            n
            for n in nodes
            if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "scheduled_sends"
        ]

    def test_a_receipt_finds_its_row_through_the_provider_message_index(self, big_queue):
        """A provider's callback names only its message id; among 120,000 rows it is one
        index lookup, because the statement says the index's own condition."""
        with rls_bypass():
            nodes = explain_json(
                statements.RECORD_RECEIPT,
                {
                    "provider_message_id": "SM-1",
                    "status": "delivered",
                    "error_code": "",
                    "rank": 4,
                    "now": NOW,
                    "failure_kind": "",
                },
            )
        scans = [n for n in nodes if "Scan" in n["Node Type"]]
        assert [(n["Node Type"], n.get("Index Name")) for n in scans] == [
            ("Index Scan", "sends_provider_message_idx")
        ], nodes

    def test_tenant_read_uses_the_user_index(self, big_queue):
        """A policy-only read (no WHERE of its own) still walks the user_id index."""
        tenant = big_queue[17]
        with tenant_scope(tenant):
            nodes = explain_json("SELECT count(*) FROM scheduled_sends")
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM scheduled_sends")
                (visible,) = cursor.fetchone()
        assert visible == (DUE + FUTURE + SETTLED) // USERS
        index_names = {n.get("Index Name") for n in nodes}
        assert "scheduled_sends_nudge_uniq" in index_names
        assert not [n for n in nodes if n["Node Type"] == "Seq Scan"]


def test_claim_with_nothing_due_is_the_same_plan(transactional_db):
    """An idle minute among many future rows: same walk, which finds nothing."""
    user_ids = make_users(USERS)
    load_queue(user_ids, NOW, due=0, future=100_000, settled=0)
    analyze("scheduled_sends")
    with rls_bypass():
        nodes = explain_json(statements.CLAIM_DUE, _claim_params())
    scans = [n for n in nodes if n.get("Index Name") == "scheduled_sends_due_idx"]
    assert [n["Node Type"] for n in scans] == ["Index Scan"]
    assert not [n for n in nodes if n["Node Type"] in ("Sort", "Seq Scan", "Bitmap Heap Scan")]


@pytest.mark.django_db
@pytest.mark.parametrize("column", ["claimed_at", "claim_token"])
def test_the_claims_columns_are_in_no_index(column):
    """Stamping a claim touches no indexed column (keys, expressions or predicates),
    so it can be a heap-only update when the page has room."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname,
                   a.attnum = ANY (i.indkey)
                   OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') LIKE %(pattern)s
                   OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') LIKE %(pattern)s
              FROM pg_index i
              JOIN pg_class c ON c.oid = i.indexrelid
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = %(column)s
             WHERE i.indrelid = 'scheduled_sends'::regclass
            """,
            {"column": column, "pattern": f"%{column}%"},
        )
        indexes = dict(cursor.fetchall())
    assert "scheduled_sends_due_idx" in indexes  # the check reads the real indexes
    assert not [name for name, mentions in indexes.items() if mentions], indexes
