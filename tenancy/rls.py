"""Row-level security DDL for tenant tables, as reversible migration operations, and the
one definition of the tenant predicate; the bypass is a policy ``TO`` a NOLOGIN role, not a
flag (docs/ARCHITECTURE.md, "Why a role-gated bypass rather than a flag").
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db import migrations

from tenancy.scope import PLANNING_SETTING, TENANT_SETTING

# The (SELECT …) makes the setting an InitPlan, read once per statement.
TENANT_PREDICATE = (
    f"user_id = (SELECT nullif(current_setting('{TENANT_SETTING}', true), '')::bigint)"
)
# The users ``planning_scope`` named; the outer cast makes the sub-select an array for ANY.
PLANNER_PREDICATE = (
    "user_id = ANY (CAST((SELECT string_to_array(nullif(current_setting("
    f"'{PLANNING_SETTING}', true), ''), ',')::bigint[]) AS bigint[]))"
)
TENANT_POLICY = "tenant_isolation"
SWEEPER_POLICY = "sweeper_all_queue_rows"
SUPPORT_POLICY = "support_all_rows"
PLANNER_POLICY = "planner_named_users"

# What ``planning_scope`` may do per table; each of these carries the planner's policy.
PLANNER_GRANTS: dict[str, str] = {
    "delivery_settings": "SELECT, UPDATE (capped_nudges, capped_at)",
    "calendar_connections": "SELECT",
    "calendar_events": "SELECT",
    "follow_ups": "SELECT",
    "nudge_acts": "SELECT",
    "scheduled_sends": "SELECT, INSERT, DELETE",
}


def _role(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _grant(privileges: str, on: str, role: str) -> tuple[str, str]:
    return f"GRANT {privileges} ON {on} TO {role}", f"REVOKE {privileges} ON {on} FROM {role}"


def _undoable(*steps: tuple[str, str]) -> migrations.RunSQL:
    return migrations.RunSQL(
        sql=[do for do, _undo in steps], reverse_sql=[undo for _do, undo in reversed(steps)]
    )


# The tables whose migrations also apply ``grant_sweeper``: the queue alone.
SWEEPER_TABLES = frozenset({"scheduled_sends"})


def _policy(name: str, table: str) -> str:
    role, predicate = {
        TENANT_POLICY: ("PUBLIC", TENANT_PREDICATE),
        SUPPORT_POLICY: (_role(settings.NUDGE_DB_SUPPORT_ROLE), "true"),
        SWEEPER_POLICY: (_role(settings.NUDGE_DB_SWEEPER_ROLE), "true"),
        PLANNER_POLICY: (_role(settings.NUDGE_DB_PLANNER_ROLE), PLANNER_PREDICATE),
    }[name]
    return (
        f"CREATE POLICY {name} ON {table} FOR ALL TO {role} "
        f"USING ({predicate}) WITH CHECK ({predicate})"
    )


def planner_statements(table: str, *, like: str) -> list[str]:
    """The planner's policy and grants on ``table`` (``like`` or a partition of it); idempotent."""
    planner = _role(settings.NUDGE_DB_PLANNER_ROLE)
    return [
        f"DROP POLICY IF EXISTS {PLANNER_POLICY} ON {table}",
        _policy(PLANNER_POLICY, table),
        f"GRANT {PLANNER_GRANTS[like]} ON {table} TO {planner}",
    ]


def revoke_planner_statements(table: str) -> list[str]:
    planner = _role(settings.NUDGE_DB_PLANNER_ROLE)
    return [
        f"REVOKE ALL ON {table} FROM {planner}",
        f"DROP POLICY IF EXISTS {PLANNER_POLICY} ON {table}",
    ]


def grant_planner(table: str) -> migrations.RunSQL:
    """Let ``planning_scope`` reach ``table``'s rows of the users it names."""
    return migrations.RunSQL(
        sql=planner_statements(table, like=table), reverse_sql=revoke_planner_statements(table)
    )


def grant_planner_user_reads() -> migrations.RunSQL:
    """Whether a user is active, and nothing else of ``auth_user`` (a column grant)."""
    planner = _role(settings.NUDGE_DB_PLANNER_ROLE)
    return _undoable(_grant("SELECT (id, is_active)", "auth_user", planner))


def _created_policy(name: str, table: str) -> tuple[str, str]:
    return _policy(name, table), f"DROP POLICY IF EXISTS {name} ON {table}"


def enable_tenant_rls(table: str) -> migrations.RunSQL:
    """ENABLE + FORCE row-level security on ``table`` with the tenant and support policies.
    The tenant policy is TO PUBLIC: a role without a wider one sees one tenant, or nothing."""
    alter = f"ALTER TABLE {table} "
    return _undoable(
        (alter + "ENABLE ROW LEVEL SECURITY", alter + "DISABLE ROW LEVEL SECURITY"),
        (alter + "FORCE ROW LEVEL SECURITY", alter + "NO FORCE ROW LEVEL SECURITY"),
        _created_policy(TENANT_POLICY, table),
        _created_policy(SUPPORT_POLICY, table),
    )


def grant_sweeper(table: str) -> migrations.RunSQL:
    """Let the sweeper role claim and settle ``table``'s rows across tenants: SELECT and
    UPDATE, under a policy that admits UPDATE (``FOR UPDATE`` under a SELECT-only one
    silently returns nothing)."""
    sweeper = _role(settings.NUDGE_DB_SWEEPER_ROLE)
    return _undoable(
        _grant("SELECT, UPDATE", table, sweeper), _created_policy(SWEEPER_POLICY, table)
    )


# A policy as PostgreSQL reports it (``pg_policies``), expressions deparsed.
PolicyShape = tuple[str, str, str, tuple[str, ...], str | None, str | None]

_POLICY_SHAPES = """
SELECT tablename, policyname, permissive, cmd, roles::text[], qual, with_check
  FROM pg_policies WHERE schemaname = {schema} AND tablename = ANY(%s)
"""
_PROBE = "nudge_policy_probe"


def deployed_policies_of(
    cursor, tables: Sequence[str], schema_sql: str = "current_schema()"
) -> dict[str, dict[str, PolicyShape]]:
    """Each table's policies by name, as the server holds them now, in one query."""
    cursor.execute(_POLICY_SHAPES.format(schema=schema_sql), [list(tables)])
    shapes: dict[str, dict[str, PolicyShape]] = {table: {} for table in tables}
    for table, *row in cursor.fetchall():
        shapes[table][row[0]] = (*row[:3], tuple(sorted(row[3])), *row[4:])
    return shapes


def expected_policies(cursor, table: str) -> dict[str, PolicyShape]:
    """The policies the migrations install on tenant ``table``, deparsed by this server.
    Creates them on a temporary table: the caller must roll the transaction back."""
    cursor.execute(f"CREATE TEMPORARY TABLE {_PROBE} (user_id bigint) ON COMMIT DROP")
    policies = [TENANT_POLICY, SUPPORT_POLICY]
    if table in SWEEPER_TABLES:
        policies.append(SWEEPER_POLICY)
    if table in PLANNER_GRANTS:
        policies.append(PLANNER_POLICY)
    for name in policies:
        cursor.execute(_policy(name, _PROBE))
    temporary = "(SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema())"
    return deployed_policies_of(cursor, [_PROBE], temporary)[_PROBE]


def across_tenants(table: str, statement: str) -> migrations.RunSQL:
    """A data migration over every tenant's rows of ``table`` (forward only). FORCE binds
    the owner too, so it is lifted for this statement alone, inside the transaction."""
    return migrations.RunSQL(
        sql=[
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
            statement,
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        ],
        reverse_sql=migrations.RunSQL.noop,
    )


# What the sweeper may write to a queue row, and nothing else: it sees every tenant's
# rows, so it must never re-own or re-aim one (``user_id``, ``kind``, ``ref_id``, …).
SWEEPER_UPDATABLE_COLUMNS = (
    "claimed_at",
    "claim_token",
    "send_started_at",
    "sent_at",
    "outcome",
    "attempts",
    "not_before",
    "last_error",
    "channel",
    "provider_message_id",
    "delivery_status",
    "delivery_error_code",
    "delivery_updated_at",
    "fire_at",
    "failure_kind",
)


def restrict_sweeper_updates(table: str, columns: Sequence[str]) -> migrations.RunSQL:
    """Narrow the sweeper's UPDATE on ``table`` to exactly ``columns``; SELECT and DELETE stay."""
    sweeper = _role(settings.NUDGE_DB_SWEEPER_ROLE)
    grant_all, revoke_all = _grant("UPDATE", table, sweeper)
    narrowed = f"GRANT UPDATE ({', '.join(columns)}) ON {table} TO {sweeper}"
    return _undoable((revoke_all, grant_all), (narrowed, revoke_all))


def grant_sweeper_updates(table: str, columns: Sequence[str]) -> migrations.RunSQL:
    """Let the sweeper update state columns a later migration adds."""
    sweeper = _role(settings.NUDGE_DB_SWEEPER_ROLE)
    return _undoable(_grant(f"UPDATE ({', '.join(columns)})", table, sweeper))


def grant_dml_everywhere(role_name: str) -> migrations.RunSQL:
    """DML on every table and sequence of the schema, now and (the owner's default
    privileges) for tables later migrations make. Only DML: no TRUNCATE (it skips
    row-level security), no REFERENCES, no TRIGGER."""
    role = _role(role_name)
    dml, sequences = "SELECT, INSERT, UPDATE, DELETE", "USAGE, SELECT"
    defaults = "ALTER DEFAULT PRIVILEGES IN SCHEMA public "
    later = [_grant(dml, "TABLES", role), _grant(sequences, "SEQUENCES", role)]
    return _undoable(
        _grant(dml, "ALL TABLES IN SCHEMA public", role),
        _grant(sequences, "ALL SEQUENCES IN SCHEMA public", role),
        *[(defaults + do, defaults + undo) for do, undo in later],
    )


def tenant_table_security(table: str, *, like: str) -> list[str]:
    """Tenant table ``like``'s row-level security and grants, for ``table``, a partition of
    it: named directly, a partition's own apply, and a new one has none."""
    login = _role(settings.NUDGE_DB_LOGIN_ROLE)
    support = _role(settings.NUDGE_DB_SUPPORT_ROLE)
    statements = [
        *enable_tenant_rls(table).sql,
        f"REVOKE ALL ON {table} FROM PUBLIC",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {login}, {support}",
    ]
    if like in SWEEPER_TABLES:
        sweeper = _role(settings.NUDGE_DB_SWEEPER_ROLE)
        statements += [
            _policy(SWEEPER_POLICY, table),
            f"GRANT SELECT, DELETE ON {table} TO {sweeper}",
            f"GRANT UPDATE ({', '.join(SWEEPER_UPDATABLE_COLUMNS)}) ON {table} TO {sweeper}",
        ]
    if like in PLANNER_GRANTS:
        statements += planner_statements(table, like=like)
    return statements
