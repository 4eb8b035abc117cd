"""Django set-up, the dedicated bench database, and measuring helpers.

The bench database is made by Django's own test-database machinery, from the
``<name>_template`` database exactly like the test databases (settings' TEST
TEMPLATE), on whatever server ``DATABASE_URL`` names — the embedded server
when it is unset. It is ``<name>_bench``: never the dev or a test database.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager
from urllib.parse import quote


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nudgeproject.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # one line per sweep run is noise here
    import django

    django.setup()


def create_bench_database() -> str:
    """Drop and re-create ``<name>_bench`` from the template, migrated; its name."""
    from django.db import connection

    name = f"{connection.settings_dict['NAME']}_bench"
    connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    return name


def database_url() -> str:
    """A DATABASE_URL for the bench database, for child processes."""
    from django.db import connection

    db = connection.settings_dict
    # The parameters, not the settings: the embedded server's socket folder is
    # known only once it runs (tenancy/backend).
    host = quote(connection.get_connection_params().get("host") or "", safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    return f"postgres://{quote(db['USER'], safe='')}{password}@{host}{port}/{db['NAME']}"


def conninfo(**extra: str) -> str:
    """A libpq conninfo for the bench database (for Procrastinate's own pool)."""
    from django.db import connection
    from psycopg.conninfo import make_conninfo

    db = connection.settings_dict
    host = connection.get_connection_params().get("host")
    params = {"dbname": db["NAME"], "user": db["USER"], "host": host or None}
    if db.get("PORT"):
        params["port"] = str(db["PORT"])
    if db.get("PASSWORD"):
        params["password"] = db["PASSWORD"]
    params.update(extra)
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


def child_env(**extra: str) -> dict[str, str]:
    from django.conf import settings

    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "SECRET_KEY": settings.SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": "nudgeproject.settings",
            "LOG_LEVEL": "WARNING",
        }
    )
    env.update(extra)
    from tests.support.processes import with_tuning

    return with_tuning(env)


def sql(statement: str, params: object = None) -> list[tuple]:
    """Run one statement as the login role (outside any scope); its rows."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def login_role() -> str:
    """The login role, quoted for DDL."""
    from django.db import connection

    return '"' + connection.settings_dict["USER"].replace('"', '""') + '"'


def owner_sql(statement: str, params: object = None) -> None:
    """Run one schema statement (DDL, TRUNCATE, VACUUM) as the owner role.

    The login role has DML only; the bench's set-up steps that change or
    maintain the schema connect as the owner, as ``migrate`` does.
    """
    from django.db import connection

    from tenancy.owner import connected_as_owner

    with connected_as_owner(), connection.cursor() as cursor:
        cursor.execute(statement, params)


def vacuum(table: str, *, analyze: bool = True) -> None:
    # Autocommit: VACUUM cannot run in a transaction. Only the owner may vacuum.
    owner_sql(f"VACUUM {'(ANALYZE) ' if analyze else ''}{table}")


def now() -> object:
    from scheduled_sends.queue.transitions import database_now

    return database_now()


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


class _Rollback(Exception):
    pass


def claim_params(at, limit: int | None = None) -> dict[str, object]:
    from core.config import NudgeConfig
    from scheduled_sends.queue import transitions

    return transitions.claim_params(at, NudgeConfig.from_settings(), limit)


def explain_claim(at, *, limit: int | None = None, table: str | None = None) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of the claim, rolled back; DB time in ms and buffers.

    ``table=None`` runs ``statements.CLAIM_DUE`` as shipped, under ``rls_bypass()``
    (the sweeper role, FORCE RLS in effect). A ``table`` runs the same text on
    that table instead, as the login role with no scope (for a copy without RLS).
    """
    from django.db import connection, transaction

    from scheduled_sends.queue import statements
    from tenancy.scope import rls_bypass

    statement = statements.CLAIM_DUE
    scope = rls_bypass()
    if table:
        statement = statement.replace("scheduled_sends", table)
        scope = transaction.atomic()
    result: dict = {}
    try:
        with scope, connection.cursor() as cursor:
            cursor.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, claim_params(at, limit)
            )
            raw = cursor.fetchone()[0]
            result = _summarise_explain(raw)
            raise _Rollback
    except _Rollback:
        pass
    return result


def _summarise_explain(raw) -> dict:
    import json

    if isinstance(raw, str):
        raw = json.loads(raw)
    top = raw[0]
    plan = top["Plan"]
    nodes, stack = [], [plan]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    cte = next((n for n in nodes if n.get("Subplan Name") == "CTE due"), None)
    chain = []
    node = cte
    while node is not None:
        label = node["Node Type"]
        if node.get("Index Name"):
            label += f" using {node['Index Name']}"
        chain.append(label)
        node = node["Plans"][0] if node.get("Plans") else None
    return {
        "planning_ms": top.get("Planning Time", 0.0),
        "execution_ms": top.get("Execution Time", 0.0),
        "db_ms": top.get("Planning Time", 0.0) + top.get("Execution Time", 0.0),
        "rows": cte.get("Actual Rows", 0) if cte else None,
        "buffers": plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0),
        "cte_plan": " → ".join(chain),
        "has_sort": any(n["Node Type"] in ("Sort", "Incremental Sort") for n in nodes),
    }


@contextmanager
def stage(label: str):
    started = time.perf_counter()
    print(f"… {label}", flush=True)
    yield
    print(f"  done in {time.perf_counter() - started:.1f}s", flush=True)


def project_root():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent
