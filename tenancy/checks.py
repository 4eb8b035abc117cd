"""System check: refuse to run quietly where row-level security is not what we installed.

Isolation is decorative when the application's role, or any role it can
``SET ROLE`` into, is a superuser or has BYPASSRLS; when it can act as the
owner of a table, the schema or the database (and so ALTER a table, disable
row security, rewrite a policy or set a session default for everyone); when
a tenant table lost ENABLE/FORCE; when a policy was added, dropped or
rewritten (one extra permissive ``USING (true)`` policy opens a
table to everyone); when a role or database default pre-sets a tenant or a
role for every session; or when the sweeper may re-own a queue row. Names are
not enough — the policies' contents are compared with what the migrations
install (``tenancy.rls.expected_policies``).

``manage.py check`` (and every command that runs checks) and ``nudge_health``
fail on any of these. While ``migrate`` runs, the schema is the thing being
changed, so the system check then only looks at the roles.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from tenancy.bootstrap import SESSION_SETTINGS_REFUSED
from tenancy.models import tenant_models
from tenancy.rls import SWEEPER_TABLES, PolicyShape, deployed_policies, expected_policies

# Columns that say whose row it is and what it is for; the sweeper sees every
# tenant's queue rows, so it must never be able to change these.
QUEUE_IDENTITY_COLUMNS = ("user_id", "kind", "ref_id", "intended_at")

_ROLE = "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s"
# Every role the login role can become with SET ROLE (pg_has_role MEMBER
# follows memberships transitively), and whether it skips RLS.
_REACHABLE_BYPASS = """
SELECT rolname FROM pg_roles
 WHERE rolname <> %(login)s AND pg_has_role(%(login)s, oid, 'MEMBER')
   AND (rolsuper OR rolbypassrls)
 ORDER BY rolname
"""
_TABLES = """
SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner),
       pg_has_role(%(login)s, c.relowner, 'MEMBER'),
       has_table_privilege(%(login)s, c.oid, 'TRUNCATE')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relname = ANY(%(tables)s)
 ORDER BY c.relname
"""
# Everything else the login role could ALTER because it owns it (or can become
# its owner): the database (ALTER DATABASE … SET role), the schema, and the
# schema's other tables, sequences and views.
_OTHER_OWNED = """
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
_SESSION_DEFAULTS = """
SELECT coalesce(r.rolname, 'every role') || coalesce(' in database ' || d.datname, ''), c
  FROM pg_db_role_setting s CROSS JOIN unnest(s.setconfig) AS c
  LEFT JOIN pg_roles r ON r.oid = s.setrole
  LEFT JOIN pg_database d ON d.oid = s.setdatabase
 WHERE (r.rolname = %(login)s AND (s.setdatabase = 0 OR d.datname = current_database())
        OR s.setrole = 0 AND d.datname = current_database())
   AND split_part(c, '=', 1) LIKE ANY(%(refused)s)
 ORDER BY 1, 2
"""
_SWEEPER_IDENTITY_UPDATES = """
SELECT attname FROM pg_attribute
 WHERE attrelid = to_regclass(%(table)s) AND attname = ANY(%(columns)s) AND NOT attisdropped
   AND has_column_privilege(%(sweeper)s, attrelid, attnum, 'UPDATE')
 ORDER BY attnum
"""


class _Rollback(Exception):
    """Raised to undo the scratch table the expected policies are rendered on."""


def _expected(using: str, table: str) -> dict[str, PolicyShape]:
    shapes: dict[str, PolicyShape] = {}
    try:
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            shapes = expected_policies(cursor, table)
            raise _Rollback
    except _Rollback:
        pass
    return shapes


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


def role_problems(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Problems with the application's login role and the roles it can enter."""
    login = settings.NUDGE_DB_LOGIN_ROLE
    problems: list[str] = []
    with connections[using].cursor() as cursor:
        cursor.execute(_ROLE, [login])
        row = cursor.fetchone()
        if row is None:
            return [f"the database role {login!r} does not exist"]
        is_superuser, bypasses_rls = row
        if is_superuser:
            problems.append(f"the database role {login!r} is a superuser; RLS never applies to it")
        if bypasses_rls:
            problems.append(f"the database role {login!r} has BYPASSRLS; RLS never applies to it")
        cursor.execute(_REACHABLE_BYPASS, {"login": login})
        for (role,) in cursor.fetchall():
            problems.append(f"the database role {login!r} can switch to {role!r}, which skips RLS")
        refused = list(SESSION_SETTINGS_REFUSED)
        cursor.execute(_SESSION_DEFAULTS, {"login": login, "refused": refused})
        for target, setting in cursor.fetchall():
            problems.append(f"a session default ({target}) sets {setting} before any scope opens")
    return problems


def schema_problems(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Problems with the tenant tables: ownership, RLS flags, policies, grants."""
    login, owner = settings.NUDGE_DB_LOGIN_ROLE, settings.NUDGE_DB_OWNER_ROLE
    problems: list[str] = []
    tables = sorted(model._meta.db_table for model in tenant_models())
    expected: dict[bool, dict[str, PolicyShape]] = {}  # rendered once per kind of table
    with connections[using].cursor() as cursor:
        cursor.execute(_TABLES, {"login": login, "tables": tables})
        present = cursor.fetchall()
        for table, enabled, forced, table_owner, login_can_own, truncate in present:
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
            kind = table in SWEEPER_TABLES
            if kind not in expected:
                expected[kind] = _expected(using, table)
            deployed = deployed_policies(cursor, table)
            problems.extend(_policy_problems(table, deployed, expected[kind]))
        cursor.execute(_OTHER_OWNED, {"login": login, "tables": tables})
        for (thing,) in cursor.fetchall():
            problems.append(f"the database role {login!r} can act as the owner of {thing}")
        for table in sorted(SWEEPER_TABLES & {row[0] for row in present}):
            cursor.execute(
                _SWEEPER_IDENTITY_UPDATES,
                {
                    "table": table,
                    "columns": list(QUEUE_IDENTITY_COLUMNS),
                    "sweeper": settings.NUDGE_DB_SWEEPER_ROLE,
                },
            )
            for (column,) in cursor.fetchall():
                problems.append(f"the sweeper role may UPDATE {table}.{column} (re-own a row)")
    return problems


def rls_problems(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Plain-language problems with the roles and tenant tables; empty when all is as installed."""
    return role_problems(using) + schema_problems(using)


def _migrating(using: str) -> bool:
    return connections[using].settings_dict.get("USER") == settings.NUDGE_DB_OWNER_ROLE


@checks.register("nudge")
def check_row_level_security(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    # Tables not created yet (before the first migrate) are not checked; the
    # roles are, so migrations never run for a role that would skip RLS.
    try:
        problems = role_problems() if _migrating(DEFAULT_DB_ALIAS) else rls_problems()
    except DatabaseError as exc:
        return [
            checks.Warning(
                f"could not verify row-level security: {exc}".strip(),
                hint="Is the database reachable? `manage.py bootstrap_db` creates it.",
                id="tenancy.W001",
            )
        ]
    return [
        checks.Error(
            problem,
            hint="See docs/ARCHITECTURE.md, 'Tenant isolation'.",
            id="tenancy.E001",
        )
        for problem in problems
    ]
