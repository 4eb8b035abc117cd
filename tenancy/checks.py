"""System check: refuse to run quietly where row-level security is not what we installed
(roles that skip RLS or can own a table, lost ENABLE/FORCE, changed policies, session
defaults, a sweeper that may re-own a queue row). While ``migrate`` runs, only the roles.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connection, transaction

from tenancy.bootstrap import refused_session_defaults
from tenancy.models import tenant_models
from tenancy.rls import (
    PLANNER_GRANTS,
    SWEEPER_TABLES,
    SWEEPER_UPDATABLE_COLUMNS,
    PolicyShape,
    deployed_policies_of,
    expected_policies,
)

CHECK_ROLE = "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s"
# The role this session is really connected as (whatever the settings name), if it skips RLS.
CHECK_SESSION_BYPASSES = (
    "SELECT rolname FROM pg_roles WHERE rolname = current_user AND (rolsuper OR rolbypassrls)"
)
# Roles the login role can become (transitively) that skip RLS.
CHECK_REACHABLE_BYPASS = """
SELECT rolname FROM pg_roles
 WHERE rolname <> %(login)s AND pg_has_role(%(login)s, oid, 'MEMBER')
   AND (rolsuper OR rolbypassrls)
 ORDER BY rolname
"""
# The tenant tables and their partitions (each carries its own RLS flags, policies and
# grants), each with the tenant table it is checked as.
CHECK_TABLES = """
SELECT c.relname, coalesce(p.relname, c.relname), c.relrowsecurity, c.relforcerowsecurity,
       pg_get_userbyid(c.relowner), pg_has_role(%(login)s, c.relowner, 'MEMBER'),
       has_table_privilege(%(login)s, c.oid, 'TRUNCATE')
  FROM pg_class c
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class p ON p.oid = i.inhparent AND p.relname = ANY(%(tables)s)
 WHERE c.relnamespace = current_schema()::regnamespace
   AND (c.relname = ANY(%(tables)s) OR p.oid IS NOT NULL)
 ORDER BY c.relname
"""
# Whatever else the login role owns (or can become the owner of) and could ALTER.
CHECK_OTHER_OWNED = """
SELECT 'database ' || datname FROM pg_database
 WHERE datname = current_database() AND pg_has_role(%(login)s, datdba, 'MEMBER')
UNION ALL
SELECT 'schema ' || nspname FROM pg_namespace
 WHERE nspname = current_schema() AND pg_has_role(%(login)s, nspowner, 'MEMBER')
UNION ALL
SELECT relname FROM pg_class
 WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p', 'S', 'v', 'm', 'f')
   AND relname <> ALL(%(tables)s) AND pg_has_role(%(login)s, relowner, 'MEMBER')
ORDER BY 1
"""
CHECK_SWEEPER_OTHER_UPDATES = """
SELECT c.relname, a.attname
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%(tables)s)
   AND a.attnum > 0 AND a.attname <> ALL(%(columns)s) AND NOT a.attisdropped
   AND has_column_privilege(%(sweeper)s, a.attrelid, a.attnum, 'UPDATE')
 ORDER BY c.relname, a.attnum
"""


def _describe(shape: PolicyShape) -> str:
    _name, permissive, command, roles, using, with_check = shape
    return (
        f"{permissive.lower()} {command} TO {', '.join(roles)} "
        f"USING {using or '-'} WITH CHECK {with_check or '-'}"
    )


def _policy_problems(table: str, deployed: dict, expected: dict) -> list[str]:
    problems = []
    for name in sorted(expected.keys() - deployed.keys()):
        problems.append(f"the {name} policy is missing on {table}")
    for name in sorted(deployed.keys() - expected.keys()):
        problems.append(f"unexpected policy {name} on {table}: {_describe(deployed[name])}")
    for name in sorted(deployed.keys() & expected.keys()):
        if deployed[name][1:] != expected[name][1:]:
            problems.append(
                f"the {name} policy on {table} differs from the migrations': "
                f"{_describe(deployed[name])}"
            )
    return problems


def role_problems() -> list[str]:
    """Problems with the application's login role and the roles it can enter."""
    login = settings.NUDGE_DB_LOGIN_ROLE
    problems: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute(CHECK_ROLE, [login])
        row = cursor.fetchone()
        if row is None:
            return [f"the database role {login!r} does not exist"]
        is_superuser, bypasses_rls = row
        if is_superuser:
            problems.append(f"the database role {login!r} is a superuser; RLS never applies to it")
        if bypasses_rls:
            problems.append(f"the database role {login!r} has BYPASSRLS; RLS never applies to it")
        cursor.execute(CHECK_REACHABLE_BYPASS, {"login": login})
        for (role,) in cursor.fetchall():
            problems.append(f"the database role {login!r} can switch to {role!r}, which skips RLS")
        database = connection.settings_dict["NAME"]
        for in_database, role, setting in refused_session_defaults(cursor, [login], [database]):
            target = (role or "every role") + (f" in database {in_database}" if in_database else "")
            problems.append(f"a session default ({target}) sets {setting} before any scope opens")
    return problems


def schema_problems() -> list[str]:
    """Problems with the tenant tables: ownership, RLS flags, policies, grants."""
    login, owner = settings.NUDGE_DB_LOGIN_ROLE, settings.NUDGE_DB_OWNER_ROLE
    problems: list[str] = []
    tenant_tables = [model._meta.db_table for model in tenant_models()]
    # Rendered once per kind of table: (a queue table, a table planning reads).
    expected: dict[tuple[bool, bool], dict[str, PolicyShape]] = {}
    with connection.cursor() as cursor:
        cursor.execute(CHECK_TABLES, {"login": login, "tables": tenant_tables})
        present = cursor.fetchall()
        tables = [row[0] for row in present]
        deployed_of = deployed_policies_of(cursor, tables)
        for table, parent, enabled, forced, table_owner, login_can_own, truncate in present:
            if not enabled:
                problems.append(f"row-level security is not enabled on {table}")
            if not forced:
                problems.append(f"row-level security is not forced on {table}")
            if table_owner != owner:
                problems.append(f"{table} is owned by {table_owner!r}, not the owner {owner!r}")
            if login_can_own:
                problems.append(
                    f"the database role {login!r} can act as the owner of {table} "
                    "(ALTER it, turn RLS off, rewrite its policies)"
                )
            if truncate:
                problems.append(f"the database role {login!r} may TRUNCATE {table}, skipping RLS")
            kind = (parent in SWEEPER_TABLES, parent in PLANNER_GRANTS)
            if kind not in expected:
                with transaction.atomic():
                    expected[kind] = expected_policies(cursor, parent)
                    transaction.set_rollback(True)  # drop the scratch table
            problems.extend(_policy_problems(table, deployed_of[table], expected[kind]))
        cursor.execute(CHECK_OTHER_OWNED, {"login": login, "tables": tables})
        for (thing,) in cursor.fetchall():
            problems.append(f"the database role {login!r} can act as the owner of {thing}")
        queue_tables = [table for table, parent, *_ in present if parent in SWEEPER_TABLES]
        cursor.execute(
            CHECK_SWEEPER_OTHER_UPDATES,
            {
                "tables": queue_tables,
                "columns": list(SWEEPER_UPDATABLE_COLUMNS),
                "sweeper": settings.NUDGE_DB_SWEEPER_ROLE,
            },
        )
        for table, column in cursor.fetchall():
            problems.append(f"the sweeper role may UPDATE {table}.{column}, not a state column")
    return problems


def rls_problems() -> list[str]:
    """Plain-language problems with the roles and tenant tables; empty when all is as installed."""
    return role_problems() + schema_problems()


@checks.register("nudge")
def check_row_level_security(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    try:  # asked on its own, so a failure of the rest of the check cannot soften it
        with connection.cursor() as cursor:
            cursor.execute(CHECK_SESSION_BYPASSES)
            bypassing = cursor.fetchone()
    except DatabaseError:
        bypassing = None  # unreachable: said below
    if bypassing is not None:
        messages.append(
            checks.Error(
                f"connected to PostgreSQL as {bypassing[0]!r}, a superuser (or BYPASSRLS) role: "
                "row-level security never applies, so tenants are not isolated",
                hint="Connect as the application's own role (DATABASE_URL); "
                "see docs/OPERATIONS.md, 'Database roles'.",
                id="tenancy.E002",
            )
        )
    try:
        # As the owner (``migrate``) only the roles: the schema is about to change.
        migrating = connection.settings_dict.get("USER") == settings.NUDGE_DB_OWNER_ROLE
        problems = role_problems() if migrating else rls_problems()
    except DatabaseError as exc:
        return [
            *messages,
            checks.Warning(
                f"could not verify row-level security: {exc}".strip(),
                hint="Is the database reachable? `manage.py bootstrap_db` creates it.",
                id="tenancy.W001",
            ),
        ]
    return messages + [
        checks.Error(
            problem,
            hint="See docs/ARCHITECTURE.md, 'Tenant isolation'.",
            id="tenancy.E001",
        )
        for problem in problems
    ]
