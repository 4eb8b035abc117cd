"""System check: refuse to run quietly where row-level security is not enforced.

A superuser or BYPASSRLS role skips every policy, and a tenant table without
FORCE skips them for its owner — the application role. Either way every
tenant query would "work" and isolation would be decorative, so
``manage.py check`` (and every command that runs checks, and ``nudge_health``)
fails instead.
"""

from __future__ import annotations

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from tenancy.models import tenant_models
from tenancy.rls import TENANT_POLICY


def rls_problems(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Plain-language problems with the connected role and tenant tables."""
    problems: list[str] = []
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        role, is_superuser, bypasses_rls = cursor.fetchone()
        if is_superuser:
            problems.append(f"the database role {role!r} is a superuser; RLS never applies to it")
        if bypasses_rls:
            problems.append(f"the database role {role!r} has BYPASSRLS; RLS never applies to it")
        tables = sorted(model._meta.db_table for model in tenant_models())
        cursor.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "       EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid "
            "               AND p.polname = %s) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(%s)",
            [TENANT_POLICY, tables],
        )
        for table, enabled, forced, has_policy in cursor.fetchall():
            if not enabled:
                problems.append(f"row-level security is not enabled on {table}")
            if not forced:
                problems.append(f"row-level security is not forced on {table}")
            if not has_policy:
                problems.append(f"the {TENANT_POLICY} policy is missing on {table}")
    return problems


@checks.register("nudge")
def check_row_level_security(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    # Tables not created yet (before the first migrate) are not checked;
    # the role is, so migrations never run as a role that would own them wrongly.
    try:
        problems = rls_problems()
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
