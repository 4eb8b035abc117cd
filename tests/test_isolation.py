"""Tenant isolation, proven as production runs it: a non-superuser role,
against the policies the shipped migrations created."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction

from accounts.models import AccountNotice
from calendars.models import CalendarConnection, CalendarEvent, Provider, ProviderRelease
from core.config import NudgeConfig
from followups.models import FollowUp
from messaging.addresses import new_telegram_code
from messaging.models import ChatRecord, OptInRecord
from portal.models import ApiRate
from portal.tokens import new_api_token
from scheduled_sends.models import NudgeAct, ScheduledSend
from scheduled_sends.queue.partitions import Partition, partitions
from scheduled_sends.queue.transitions import (
    NewNudge,
    Transition,
    claim_due,
    enqueue,
)
from tenancy.checks import rls_problems
from tenancy.models import tenant_models
from tenancy.rls import PLANNER_GRANTS, deployed_policies_of
from tenancy.scope import (
    ScopeError,
    current_scope,
    planning_scope,
    rls_bypass,
    support_scope,
    tenant_read,
    tenant_scope,
    tenant_statements,
    unscoped_relaxed,
)
from tests.conftest import utc
from tests.support.queue import queue_nudge, settle_one

NOW = utc(2026, 12, 2, 15, 0)
TENANT_TABLES = [
    "scheduled_sends",
    "delivery_settings",
    "calendar_connections",
    "calendar_events",
    "calendar_releases",
    "follow_ups",
    "portal_link_codes",
    "portal_api_tokens",
    "portal_api_rates",
    "portal_opt_ins",
    "portal_account_notices",
    "nudge_acts",
    "chat_records",
]


def _seed(user) -> None:
    with tenant_scope(user.pk):
        connection_row = CalendarConnection.objects.create(user=user, provider=Provider.ICS)
        event = CalendarEvent.objects.create(
            user=user,
            connection=connection_row,
            provider_event_id=f"evt-{user.pk}",
            title="Design review",
            starts_at=NOW + timedelta(minutes=5),
        )
        FollowUp.objects.create(user=user, title="Call back", due_at=NOW + timedelta(hours=1))
    queue_nudge(
        user.pk,
        kind="event",
        ref_id=event.pk,
        at=NOW - timedelta(minutes=5),
        subject_starts_at=event.starts_at,
    )
    with tenant_scope(user.pk):
        new_telegram_code(user.pk, NOW, NudgeConfig.from_settings())
        new_api_token(user.pk, "host")
        ApiRate.objects.create(user=user, window_at=NOW, requests=1)
        OptInRecord.objects.create(
            user=user, channel="telegram", address="1", method="test", recorded_at=NOW
        )
        AccountNotice.objects.create(user=user, text="a notice", created_at=NOW)
        ProviderRelease.objects.create(
            user=user, connection_id=10_000 + user.pk, provider=Provider.GOOGLE, requested_at=NOW
        )
        ChatRecord.objects.create(
            user=user, kind=ChatRecord.Kind.HELP, channel="telegram", created_at=NOW
        )
        NudgeAct.objects.create(
            user=user,
            source_send_id=1,
            act=NudgeAct.Act.SNOOZE,
            kind="event",
            ref_id=event.pk,
            subject_starts_at=event.starts_at,
            snoozed_until=NOW + timedelta(minutes=1),
            via="telegram",
            created_at=NOW,
        )


@pytest.fixture
def tenants(make_user):
    a, b = make_user("alice"), make_user("bob")
    _seed(a)
    _seed(b)
    return a, b


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 — fixed table names
        return cursor.fetchone()[0]


def _owners(table: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT user_id FROM {table}")  # noqa: S608
        return {row[0] for row in cursor.fetchall()}


def _seeded_owners(table: str) -> set[int]:
    """Who owns rows, seen through the support role: refuses an empty table."""
    with support_scope():
        owners = _owners(table)
    assert len(owners) >= 2, f"{table} must hold two tenants' rows, or these tests prove nothing"
    return owners


def test_harness_is_not_vacuous(db):
    """FORCE RLS never binds a superuser or a BYPASSRLS role: refuse to run as one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolsuper, rolbypassrls, rolinherit FROM pg_roles WHERE rolname = current_user"
        )
        is_superuser, bypasses_rls, inherits = cursor.fetchone()
    assert not is_superuser, "the suite is running as a superuser: RLS is not enforced"
    assert not bypasses_rls, "the suite's role has BYPASSRLS: RLS is not enforced"
    assert not inherits, "the login role must be NOINHERIT so the sweeper policy never applies"


def test_every_tenant_table_is_covered_and_enforced(db):
    assert sorted(m._meta.db_table for m in tenant_models()) == sorted(TENANT_TABLES)
    assert rls_problems() == []


@pytest.mark.parametrize("table", TENANT_TABLES)
def test_unscoped_reads_and_writes_see_nothing(tenants, table):
    _seeded_owners(table)
    assert _count(table) == 0
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET user_id = user_id RETURNING id")  # noqa: S608
        assert cursor.fetchall() == []


@pytest.mark.parametrize("table", TENANT_TABLES)
def test_tenant_scope_sees_and_updates_only_its_own_rows(tenants, table):
    a, b = tenants
    assert _seeded_owners(table) >= {a.pk, b.pk}
    with tenant_scope(a.pk):
        assert _owners(table) == {a.pk}
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET user_id = user_id RETURNING user_id")  # noqa: S608
            assert {row[0] for row in cursor.fetchall()} == {a.pk}


@pytest.mark.parametrize("table", TENANT_TABLES)
def test_forged_writes_for_another_tenant_are_refused(tenants, table):
    a, b = tenants
    _seeded_owners(table)
    with pytest.raises(DatabaseError, match="row-level security"), tenant_scope(a.pk):
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET user_id = %s", [b.pk])  # noqa: S608


def test_forged_insert_for_another_tenant_is_refused(tenants):
    a, b = tenants
    forged = NewNudge("follow_up", 1, NOW, NOW, 0)
    with pytest.raises(DatabaseError, match="row-level security"), tenant_scope(a.pk):
        enqueue(b.pk, "console", [forged])


def test_bypass_claims_and_settles_every_tenants_due_rows(tenants):
    a, b = tenants
    config = NudgeConfig.from_settings()
    claimed = claim_due(NOW, config)
    assert {row.user_id for row in claimed} == {a.pk, b.pk}
    assert all(
        settle_one(row, Transition.SENT, NOW, channel="console", message_id=f"id-{row.id}")
        for row in claimed
    )
    with tenant_scope(a.pk):
        assert ScheduledSend.objects.get().outcome == "sent"


def test_unscoped_claim_sees_nothing(tenants):
    """The production failure shape: the claim's SQL without the bypass stamps nothing."""
    from scheduled_sends.queue import statements, transitions

    with connection.cursor() as cursor:
        cursor.execute(
            statements.CLAIM_DUE, transitions.claim_params(NOW, NudgeConfig.from_settings(), 200)
        )
        assert cursor.fetchall() == []
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM scheduled_sends WHERE claimed_at IS NOT NULL")
        assert cursor.fetchone()[0] == 0


@pytest.mark.parametrize("table", [t for t in TENANT_TABLES if t != "scheduled_sends"])
def test_bypass_cannot_read_anything_but_the_queue(tenants, table):
    """Under the bypass a careless read of user data fails loudly instead of succeeding."""
    with pytest.raises(DatabaseError, match="permission denied"), rls_bypass():
        _count(table)


@pytest.mark.parametrize(
    "value",
    ["abc", " ", "1 OR 1=1", "1; SELECT 1", "9223372036854775808", "-1 UNION SELECT 2", "1.5"],
)
def test_bad_tenant_setting_values_give_an_error_never_rows(tenants, value):
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('app.current_user_id', %s, true)", [value])
        cursor.execute("SELECT user_id FROM scheduled_sends")
        cursor.fetchall()


def test_empty_tenant_setting_sees_nothing(tenants):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('app.current_user_id', '', true)")
        assert _count("scheduled_sends") == 0


@pytest.mark.parametrize("value", ["on", "ON", "true", "1", "yes"])
def test_flag_style_bypass_values_do_nothing(tenants, value):
    """There is no flag to guess: only entering the sweeper role widens the view."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('app.bypass_rls', %s, true)", [value])
        assert _count("scheduled_sends") == 0


@pytest.mark.parametrize("bad", ["abc", "", None, 0, -1, 2**63, True, 1.0, "1"])
def test_tenant_scope_rejects_non_ids(db, bad):
    with pytest.raises(ScopeError), tenant_scope(bad):
        pass


def test_scopes_refuse_to_nest(tenants):
    a, b = tenants
    with tenant_scope(a.pk):
        for inner in (lambda: tenant_scope(b.pk), rls_bypass, support_scope):
            with pytest.raises(ScopeError, match="do not nest"), inner():
                pass
        assert current_scope() == f"tenant_scope({a.pk})"


def test_scopes_refuse_a_transaction_they_do_not_own(tenants):
    a, _ = tenants
    with transaction.atomic():
        for scope in (lambda: tenant_scope(a.pk), rls_bypass, support_scope):
            with pytest.raises(ScopeError, match="must own its transaction"), scope():
                pass


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("table", TENANT_TABLES)
def test_a_tenant_read_in_one_round_trip_sees_only_its_tenant(tenants, table):
    """The sync pool's read: outside any transaction the tenant travels with the
    statement, which sees that tenant's rows and nobody else's, may not write, and
    leaves no setting behind for the connection's next user."""
    a, b = tenants
    assert _seeded_owners(table) == {a.pk, b.pk}
    owners = f"SELECT DISTINCT user_id FROM {table}"  # noqa: S608 — fixed table names
    assert tenant_read(a.pk, owners, {}) == [(a.pk,)]
    assert tenant_read(b.pk, owners, {}) == [(b.pk,)]
    assert _count(table) == 0  # nothing left behind: unscoped again
    assert connection.connection.info.transaction_status == 0
    with pytest.raises(DatabaseError, match="read-only"):
        tenant_read(a.pk, f"DELETE FROM {table} RETURNING user_id", {})  # noqa: S608
    with pytest.raises(ScopeError):
        tenant_read("1 OR true", owners, {})


@pytest.mark.django_db(transaction=True)
def test_tenant_statements_in_one_round_trip_are_one_transaction_of_one_tenant(tenants):
    """The sync pool's writes: statements sent together in the tenant's scope touch
    only that tenant's rows, all of them or none, and leave nothing behind."""
    a, b = tenants
    rename = "UPDATE calendar_connections SET account = %(account)s RETURNING user_id"
    answers = tenant_statements(
        a.pk, [rename, "SELECT count(*) FROM calendar_connections"], {"account": "renamed"}
    )
    assert answers == [[(a.pk,)], [(1,)]]
    with support_scope():
        accounts = dict(CalendarConnection.objects.values_list("user_id", "account"))
    assert accounts[a.pk] == "renamed" and accounts[b.pk] != "renamed"
    with pytest.raises(DatabaseError):  # the second fails: the first is undone with it
        tenant_statements(b.pk, [rename, "SELECT 1 / 0"], {"account": "half"})
    with support_scope():
        assert CalendarConnection.objects.get(user_id=b.pk).account != "half"
    assert _count("calendar_connections") == 0  # unscoped again
    assert connection.connection.info.transaction_status == 0


@pytest.mark.django_db(transaction=True)
def test_a_one_round_trip_read_reconnects_after_the_server_dropped_its_connection(tenants):
    """A lane's connection the server dropped (a failover, an idle-session kill)
    fails the read that meets it, and the next read reconnects: it is not left
    broken for the rest of the run."""
    a, _ = tenants
    owners = "SELECT DISTINCT user_id FROM calendar_connections"
    assert tenant_read(a.pk, owners, {}) == [(a.pk,)]
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        other.autocommit = True
        other.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    finally:
        other.close()
    with pytest.raises(DatabaseError):
        tenant_read(a.pk, owners, {})
    assert tenant_read(a.pk, owners, {}) == [(a.pk,)]


@pytest.mark.django_db(transaction=True)
def test_an_unscoped_relaxed_statement_is_a_transaction_of_its_own():
    """The shared pacing's statements: outside any transaction each is one round
    trip that is its own transaction — no tenant, no role, a commit that does
    not wait for the disk — and leaves the session as it found it, so a budget
    row it locks is never held while a busy client thread comes back to commit."""
    statement = (
        "SELECT current_setting('synchronous_commit'), "
        "coalesce(current_setting('app.current_user_id', true), ''), current_user = session_user"
    )
    assert unscoped_relaxed(statement, {}) == [("off", "", True)]
    assert not connection.in_atomic_block
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone() == ("on",)
    assert connection.connection.info.transaction_status == 0  # idle: nothing left open
    with transaction.atomic(), pytest.raises(ScopeError, match="must own its transaction"):
        unscoped_relaxed(statement, {})  # inside someone else's transaction: refused


def test_sequential_scopes_in_one_test_transaction_do_not_bleed(tenants):
    """Inside the test's wrapping transaction a scope is a savepoint; the explicit
    reset on exit keeps a bypass from widening the next tenant scope."""
    a, b = tenants
    with rls_bypass():
        assert _owners("scheduled_sends") == {a.pk, b.pk}
    with tenant_scope(b.pk):
        assert _owners("scheduled_sends") == {b.pk}
    assert _count("scheduled_sends") == 0


@pytest.mark.django_db(transaction=True)
def test_scope_does_not_survive_its_transaction(make_user):
    """With real commits: the next transaction on the same connection sees nothing."""
    a, b = make_user("alice"), make_user("bob")
    _seed(a)
    _seed(b)
    with tenant_scope(a.pk):
        assert _count("scheduled_sends") == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('app.current_user_id', true), current_user")
        setting, role = cursor.fetchone()
    assert setting in ("", None)
    assert role == connection.settings_dict["USER"]
    assert _count("scheduled_sends") == 0
    with rls_bypass():
        assert _count("scheduled_sends") == 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] == connection.settings_dict["USER"]
    assert _count("scheduled_sends") == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scope", ["tenant", "bypass", "support"])
def test_a_scope_refuses_a_connection_with_autocommit_off(make_user, scope):
    """With autocommit off, atomic() neither begins nor commits its own transaction:
    the scope's SET LOCAL would still be in force after the block, until the caller
    committed — every query in between sees the scope's tenant or role."""
    a = make_user("alice")
    _seed(a)
    opened = {
        "tenant": lambda: tenant_scope(a.pk),
        "bypass": rls_bypass,
        "support": support_scope,
    }[scope]
    connection.set_autocommit(False)
    try:
        with pytest.raises(ScopeError, match="autocommit"), opened():
            pass
        # Nothing leaked into the implicit transaction either.
        assert _count("scheduled_sends") == 0
    finally:
        connection.rollback()
        connection.set_autocommit(True)
    assert current_scope() is None


@pytest.mark.django_db(transaction=True)
def test_scope_rolled_back_by_an_error_does_not_leak(make_user):
    a = make_user("alice")
    _seed(a)
    with pytest.raises(ZeroDivisionError), tenant_scope(a.pk):
        1 / 0  # noqa: B018
    assert _count("scheduled_sends") == 0
    assert current_scope() is None


def test_system_check_fails_when_force_is_missing(as_owner):
    as_owner(
        "ALTER TABLE follow_ups NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE follow_ups FORCE ROW LEVEL SECURITY",
    )
    assert rls_problems() == ["row-level security is not forced on follow_ups"]


# --- Partitions named directly (issue 25, item 3) ----------------------------
# PostgreSQL applies a partition's own row-level security, policies and grants
# when a query names the partition rather than ``scheduled_sends``; a partition
# made without them would hand one day of every tenant's queue to any role
# with the default DML grant.


def _first_day_partition() -> Partition:
    return next(part for part in partitions() if part.start is not None)


@pytest.fixture
def day_partition_tenants(make_user):
    """Alice's and Bob's nudges in the first day partition (the seeded ones are
    in the partition of everything before it)."""
    part = _first_day_partition()
    at = part.start + timedelta(hours=9)
    a, b = make_user("alice"), make_user("bob")
    for user in (a, b):
        queue_nudge(user.pk, ref_id=user.pk, at=at, subject_starts_at=at + timedelta(minutes=10))
    return part.name, a, b


def test_a_day_partition_named_directly_shows_each_tenant_only_its_own(day_partition_tenants):
    """Issue 25, item 3: the isolation suite probes a partition directly, as a
    non-superuser role — unscoped it shows nothing, scoped only the tenant's rows."""
    table, a, b = day_partition_tenants
    with support_scope():
        assert _owners(table) == {a.pk, b.pk}, "the rows must be in the probed partition"
    assert _count(table) == 0
    with tenant_scope(a.pk):
        assert _owners(table) == {a.pk}
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET last_error = 'touched'")  # noqa: S608
            assert cursor.rowcount == 1
            cursor.execute(f"DELETE FROM {table} WHERE user_id = %s", [b.pk])  # noqa: S608
            assert cursor.rowcount == 0
    with support_scope():
        assert _count(table) == 2


def test_a_forged_insert_into_a_day_partition_is_refused(day_partition_tenants):
    """Issue 25, item 3: the partition's own WITH CHECK refuses another tenant's row."""
    table, a, b = day_partition_tenants
    with tenant_scope(a.pk), connection.cursor() as cursor:
        cursor.execute(f"SELECT intended_at FROM {table} LIMIT 1")  # noqa: S608
        (at,) = cursor.fetchone()
        with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
            cursor.execute(
                f"INSERT INTO {table} (user_id, kind, ref_id, intended_at, fire_at, "  # noqa: S608
                "subject_starts_at) VALUES (%s, 'follow_up', 999, %s, %s, %s)",
                [b.pk, at, at, at],
            )


def test_the_bypass_reaches_a_day_partition_and_cannot_re_own_its_rows(day_partition_tenants):
    """Issue 25, item 3: the sweeper's policy and column grants are on the partition too."""
    table, a, b = day_partition_tenants
    with rls_bypass():
        assert _owners(table) == {a.pk, b.pk}
        with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"UPDATE {table} SET user_id = %s", [a.pk])  # noqa: S608


def test_the_partition_before_the_days_is_probed_the_same_way(tenants):
    """Issue 25, item 3: the existing table, attached as the first partition, keeps its own."""
    a, b = tenants
    with support_scope():
        assert _owners("scheduled_sends_before") == {a.pk, b.pk}
    assert _count("scheduled_sends_before") == 0
    with tenant_scope(b.pk):
        assert _owners("scheduled_sends_before") == {b.pk}


_SECURITY = """
SELECT c.relrowsecurity, c.relforcerowsecurity,
       (SELECT array_agg(a::text ORDER BY a::text) FROM unnest(c.relacl) AS a),
       (SELECT array_agg(attname || '=' || attacl::text ORDER BY attname)
          FROM pg_attribute WHERE attrelid = c.oid AND attacl IS NOT NULL)
  FROM pg_class c WHERE c.oid = %s::regclass
"""


def test_every_partition_carries_the_queues_flags_policies_and_grants(db):
    """Issue 25, item 3: each partition has what its parent has, policy for policy,
    grant for grant (the system check compares policies; this compares everything)."""
    parts = partitions()
    assert len(parts) >= 10, "the migration makes two weeks of day partitions"
    with connection.cursor() as cursor:
        cursor.execute(_SECURITY, ["scheduled_sends"])
        parent = cursor.fetchone()
        assert parent[:2] == (True, True)
        parent_policies = deployed_policies_of(cursor, ["scheduled_sends"])["scheduled_sends"]
        assert len(parent_policies) == 4  # tenant, support, sweeper, planner
        for part in parts:
            cursor.execute(_SECURITY, [part.name])
            assert cursor.fetchone() == parent, part.name
            assert deployed_policies_of(cursor, [part.name])[part.name] == parent_policies, (
                part.name
            )


def test_the_system_check_fails_when_a_partition_lost_force(as_owner):
    """Issue 25, item 3: a partition is checked like a tenant table of its own."""
    table = _first_day_partition().name
    as_owner(
        f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
    )
    assert rls_problems() == [f"row-level security is not forced on {table}"]


# --- Planning in sets: the planner role sees the users it was given, no one else ---


@pytest.mark.parametrize("table", sorted(PLANNER_GRANTS))
def test_planning_scope_sees_only_the_users_it_names(tenants, make_user, table):
    """A slice planned together (``planning_scope``) reads its own users' rows and not
    another tenant's, in every table planning reads."""
    a, b = tenants
    carol = make_user("carol")  # named too: whatever rows she has, and only hers and Alice's
    everyone = _seeded_owners(table)
    assert everyone >= {a.pk, b.pk}
    with planning_scope([a.pk, carol.pk]):
        assert _owners(table) == everyone & {a.pk, carol.pk}
    with planning_scope([b.pk]):
        assert _owners(table) == {b.pk}


@pytest.mark.parametrize("table", sorted(set(TENANT_TABLES) - set(PLANNER_GRANTS)))
def test_planning_scope_cannot_read_what_planning_does_not_need(tenants, table):
    """Tokens, link codes, opt-ins and notices are out of the planner's reach entirely."""
    a, _ = tenants
    with pytest.raises(DatabaseError, match="permission denied"), planning_scope([a.pk]):
        _count(table)


def test_planning_scope_refuses_a_row_for_a_user_it_does_not_name(tenants):
    a, b = tenants
    forged = NewNudge("follow_up", 999, NOW + timedelta(hours=1), NOW + timedelta(hours=2), 0)
    with pytest.raises(DatabaseError, match="row-level security"), planning_scope([a.pk]):
        enqueue(b.pk, "console", [forged])


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE delivery_settings SET channel = 'telegram'",
        "UPDATE calendar_events SET title = 'changed'",
        "UPDATE scheduled_sends SET user_id = user_id",
        "SELECT password FROM auth_user",
        "DELETE FROM follow_ups",
    ],
)
def test_planning_scope_writes_only_the_queue_and_the_capped_count(tenants, statement):
    """The planner may queue and withdraw nudges and record a capped count; it cannot
    change a user's settings or subjects, re-own a row, or read a password hash."""
    a, _ = tenants
    with pytest.raises(DatabaseError, match="permission denied"), planning_scope([a.pk]):
        with connection.cursor() as cursor:
            cursor.execute(statement)


def test_a_day_partition_named_directly_under_planning_scope(day_partition_tenants):
    table, a, b = day_partition_tenants
    with planning_scope([b.pk]):
        assert _owners(table) == {b.pk}
    with planning_scope([a.pk, b.pk]):
        assert _owners(table) == {a.pk, b.pk}


@pytest.mark.parametrize("value", ["1,2", "{1,2}", "on"])
def test_the_planning_setting_alone_widens_nothing(tenants, value):
    """Only entering the planner role reads the setting: set without it, nothing shows."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('app.planning_user_ids', %s, true)", [value])
        assert _count("scheduled_sends") == 0


@pytest.mark.parametrize("bad", [[], ["1"], [0], [True], [2**63]])
def test_planning_scope_rejects_non_ids(db, bad):
    with pytest.raises(ScopeError), planning_scope(bad):
        pass


def test_planning_scope_does_not_nest(tenants):
    a, b = tenants
    with planning_scope([a.pk]):
        with pytest.raises(ScopeError, match="do not nest"), tenant_scope(b.pk):
            pass
