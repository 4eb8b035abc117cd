"""The application's role cannot switch isolation off, and the check reads what is deployed.

Before the owner role existed the login role owned every table: any SQL bug
could ``ALTER TABLE … DISABLE ROW LEVEL SECURITY``, rewrite a policy, or
``SET ROLE`` into a role that re-owns queue rows; and the RLS check only
looked for a policy's *name*, so a policy rewritten to ``true`` or one extra
permissive policy went unnoticed.
"""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.db import DatabaseError, connection, transaction

from console.health import check_health
from scheduled_sends.models import ScheduledSend
from tenancy.checks import rls_problems
from tenancy.rls import SWEEPER_UPDATABLE_COLUMNS, TENANT_PREDICATE, across_tenants
from tenancy.scope import rls_bypass
from tests.conftest import admin_url, owner_conninfo, utc
from tests.support.queue import queue_nudge

NOW = utc(2026, 12, 2, 15, 0)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


OWNER = _quoted(settings.NUDGE_DB_OWNER_ROLE)
LOGIN = _quoted(settings.NUDGE_DB_LOGIN_ROLE)
SWEEPER = _quoted(settings.NUDGE_DB_SWEEPER_ROLE)

# What a SQL bug running as the application's role might try, and PostgreSQL's refusal.
OWNER_ONLY = "must be owner"
DENIED = "permission denied"
TAMPERING = [
    ("ALTER TABLE scheduled_sends DISABLE ROW LEVEL SECURITY", OWNER_ONLY),
    ("ALTER TABLE follow_ups NO FORCE ROW LEVEL SECURITY", OWNER_ONLY),
    ("ALTER POLICY tenant_isolation ON follow_ups USING (true)", OWNER_ONLY),
    ("DROP POLICY tenant_isolation ON delivery_settings", OWNER_ONLY),
    ("CREATE POLICY open_all ON calendar_events FOR SELECT USING (true)", OWNER_ONLY),
    ("ALTER TABLE scheduled_sends OWNER TO CURRENT_USER", OWNER_ONLY),
    ("TRUNCATE scheduled_sends", DENIED),
    ("CREATE TABLE stash (id int)", DENIED),
    ("CREATE SCHEMA stash", DENIED),
    (f"SET ROLE {OWNER}", DENIED),
    ("ALTER ROLE CURRENT_USER SET app.current_user_id = '1'", DENIED),
    ("ALTER DATABASE {database} SET app.current_user_id = '1'", OWNER_ONLY + "|" + DENIED),
    (f"ALTER DATABASE {{database}} SET role = {SWEEPER}", OWNER_ONLY),
    ("ALTER ROLE CURRENT_USER BYPASSRLS", "must be superuser|" + DENIED),
]


@pytest.mark.parametrize(("statement", "refusal"), TAMPERING)
def test_the_application_role_cannot_alter_the_schema_or_its_roles(db, statement, refusal):
    statement = statement.format(database=_quoted(connection.settings_dict["NAME"]))
    with pytest.raises(DatabaseError, match=refusal), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement)


def test_the_sweeper_may_update_state_columns_but_never_who_or_what_a_row_is_for(make_user):
    user = make_user()
    row = queue_nudge(user.pk, ref_id=1, at=NOW, subject_starts_at=NOW)
    state = ", ".join(f"{column} = {column}" for column in SWEEPER_UPDATABLE_COLUMNS)
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE scheduled_sends SET {state} WHERE id = %s", [row.pk])  # noqa: S608
        assert cursor.rowcount == 1
    for column in ("user_id", "kind", "ref_id"):
        with pytest.raises(DatabaseError, match="permission denied"):
            with rls_bypass(), connection.cursor() as cursor:
                cursor.execute(f"UPDATE scheduled_sends SET {column} = {column}")  # noqa: S608
    with rls_bypass(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM scheduled_sends WHERE id = %s", [row.pk])  # retention
        assert cursor.rowcount == 1


def test_the_deployed_schema_is_exactly_what_the_migrations_install(db):
    assert rls_problems() == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class "
            "WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'S')"
        )
        assert cursor.fetchall() == [(settings.NUDGE_DB_OWNER_ROLE,)]


def test_an_extra_permissive_policy_is_caught(as_owner):
    as_owner(
        "CREATE POLICY open_all ON follow_ups AS PERMISSIVE FOR SELECT USING (true)",
        "DROP POLICY open_all ON follow_ups",
    )
    assert rls_problems() == [
        "unexpected policy open_all on follow_ups: permissive SELECT TO public "
        "USING true WITH CHECK -"
    ]
    report = check_health(NOW)
    assert not next(c for c in report.checks if c.name == "row_level_security").ok


def test_a_tenant_policy_rewritten_to_true_is_caught(as_owner):
    as_owner(
        "ALTER POLICY tenant_isolation ON calendar_events USING (true)",
        f"ALTER POLICY tenant_isolation ON calendar_events USING ({TENANT_PREDICATE})",
    )
    (problem,) = rls_problems()
    assert problem.startswith(
        "the tenant_isolation policy on calendar_events differs from the migrations': "
        "permissive ALL TO public USING true WITH CHECK (user_id = "
    )


def test_a_widened_support_policy_and_a_missing_one_are_caught(as_owner):
    as_owner(
        "DROP POLICY sweeper_all_queue_rows ON scheduled_sends",
        f"CREATE POLICY sweeper_all_queue_rows ON scheduled_sends FOR ALL TO {SWEEPER} "
        "USING (true) WITH CHECK (true)",
    )
    as_owner(
        "ALTER POLICY support_all_rows ON follow_ups TO PUBLIC",
        f"ALTER POLICY support_all_rows ON follow_ups TO {_quoted(settings.NUDGE_DB_SUPPORT_ROLE)}",
    )
    assert rls_problems() == [
        "the support_all_rows policy on follow_ups differs from the migrations': "
        "permissive ALL TO public USING true WITH CHECK true",
        "the sweeper_all_queue_rows policy is missing on scheduled_sends",
    ]


@pytest.mark.django_db(transaction=True)
def test_owner_drift_and_a_reachable_owner_are_caught():
    """The layout before the owner role: the application's role owned its tables."""
    params = psycopg.conninfo.conninfo_to_dict(admin_url())
    params["dbname"] = connection.settings_dict["NAME"]
    with psycopg.connect(psycopg.conninfo.make_conninfo(**params), autocommit=True) as admin:
        admin.execute(f"ALTER TABLE delivery_settings OWNER TO {LOGIN}")
        try:
            login = settings.NUDGE_DB_LOGIN_ROLE
            assert rls_problems() == [
                f"delivery_settings is owned by {login!r}, "
                f"not the owner {settings.NUDGE_DB_OWNER_ROLE!r}",
                f"the database role {login!r} can act as the owner of delivery_settings "
                "(ALTER it, turn RLS off, rewrite its policies)",
                f"the database role {login!r} may TRUNCATE delivery_settings, skipping RLS",
                # Its sequence moved with it.
                f"the database role {login!r} can act as the owner of delivery_settings_id_seq",
            ]
        finally:
            # Changing owners folds the old owner's grant into the new owner's.
            admin.execute(f"ALTER TABLE delivery_settings OWNER TO {OWNER}")
            admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON delivery_settings TO {LOGIN}")
            admin.execute(f"GRANT USAGE, SELECT ON delivery_settings_id_seq TO {LOGIN}")


def test_truncate_and_a_sweeper_that_can_re_own_rows_are_caught(as_owner):
    as_owner(
        f"GRANT TRUNCATE ON follow_ups TO {LOGIN}", f"REVOKE TRUNCATE ON follow_ups FROM {LOGIN}"
    )
    as_owner(
        f"GRANT UPDATE (user_id) ON scheduled_sends TO {SWEEPER}",
        f"REVOKE UPDATE (user_id) ON scheduled_sends FROM {SWEEPER}",
    )
    login = settings.NUDGE_DB_LOGIN_ROLE
    assert rls_problems() == [
        f"the database role {login!r} may TRUNCATE follow_ups, skipping RLS",
        "the sweeper role may UPDATE scheduled_sends.user_id, not a state column",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_session_default_role_set_by_the_application_role_itself_is_caught():
    """PostgreSQL lets any role set its own session defaults, ``role`` included: that
    cannot be refused, so the check reports it (and ``bootstrap_db`` resets it)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER ROLE CURRENT_USER SET role = {SWEEPER}")
    try:
        assert rls_problems() == [
            f"a session default ({settings.NUDGE_DB_LOGIN_ROLE}) sets "
            f"role={settings.NUDGE_DB_SWEEPER_ROLE} before any scope opens"
        ]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER ROLE CURRENT_USER RESET role")


@pytest.mark.django_db(transaction=True)
def test_a_reachable_bypassrls_role_is_caught():
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(f"ALTER ROLE {SWEEPER} BYPASSRLS")
        try:
            assert rls_problems() == [
                f"the database role {settings.NUDGE_DB_LOGIN_ROLE!r} can switch to "
                f"{settings.NUDGE_DB_SWEEPER_ROLE!r}, which skips RLS"
            ]
        finally:
            admin.execute(f"ALTER ROLE {SWEEPER} NOBYPASSRLS")


def test_migrate_runs_as_the_owner_and_can_repair_what_the_check_reports(as_owner):
    """A database from before a grant-narrowing migration fails the full check; the
    ``migrate`` that fixes it must still run, so its checks look at the roles only."""
    as_owner(
        f"GRANT UPDATE (user_id) ON scheduled_sends TO {SWEEPER}",
        f"REVOKE UPDATE (user_id) ON scheduled_sends FROM {SWEEPER}",
    )
    with pytest.raises(SystemCheckError, match=r"may UPDATE scheduled_sends\.user_id"):
        call_command("check")
    call_command("migrate", skip_checks=False, verbosity=0)  # no SystemCheckError
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (settings.NUDGE_DB_LOGIN_ROLE,)  # back as the app role


@pytest.mark.django_db(transaction=True)
def test_migrate_without_the_owner_role_says_so_in_one_line(settings):
    missing = f"{settings.NUDGE_DB_LOGIN_ROLE}_no_such_owner"
    settings.NUDGE_DB_OWNER = {**settings.NUDGE_DB_OWNER, "USER": missing}
    settings.NUDGE_DB_OWNER_ROLE = missing
    with pytest.raises(CommandError, match=f"cannot connect as the owner role '{missing}'"):
        call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:  # the application's connection is unharmed
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (settings.NUDGE_DB_LOGIN_ROLE,)


@pytest.mark.django_db(transaction=True)
def test_the_application_role_owning_the_database_or_another_table_is_caught():
    """Owning the database lets a role ``ALTER DATABASE … SET role``; owning any table
    lets it be altered — a trigger on it, say."""
    params = psycopg.conninfo.conninfo_to_dict(admin_url())
    params["dbname"] = connection.settings_dict["NAME"]
    database = _quoted(connection.settings_dict["NAME"])
    with psycopg.connect(psycopg.conninfo.make_conninfo(**params), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {database} OWNER TO {LOGIN}")
        admin.execute(f"ALTER TABLE sweep_runs OWNER TO {LOGIN}")
        try:
            login = settings.NUDGE_DB_LOGIN_ROLE
            assert rls_problems() == [
                f"the database role {login!r} can act as the owner of {thing}"
                for thing in (
                    f"database {connection.settings_dict['NAME']}",
                    "schema public",  # the database's owner owns it (pg_database_owner)
                    "sweep_runs",
                    "sweep_runs_id_seq",
                )
            ]
        finally:
            admin.execute(f"ALTER DATABASE {database} OWNER TO {OWNER}")
            admin.execute(f"ALTER TABLE sweep_runs OWNER TO {OWNER}")
            admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON sweep_runs TO {LOGIN}")
            admin.execute(f"GRANT USAGE, SELECT ON sweep_runs_id_seq TO {LOGIN}")


@pytest.mark.django_db(transaction=True)
def test_a_data_migration_reaches_every_tenants_rows_and_leaves_force_on(make_user):
    """FORCE binds the owner too: a plain backfill UPDATE in a migration changes nothing."""
    for user in (make_user("alice"), make_user("bob")):
        queue_nudge(user.pk, ref_id=1, at=NOW, subject_starts_at=NOW)
    backfill = "UPDATE scheduled_sends SET last_error = 'backfilled'"
    with psycopg.connect(owner_conninfo()) as owner:  # one transaction, as a migration
        assert owner.execute(backfill).rowcount == 0  # what a plain RunSQL would do
        for statement in across_tenants("scheduled_sends", backfill).sql:
            owner.execute(statement)
    with rls_bypass():
        assert set(ScheduledSend.objects.values_list("last_error", flat=True)) == {"backfilled"}
    assert rls_problems() == []
