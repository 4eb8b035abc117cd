"""bootstrap_db creates or repairs roles and databases, idempotently."""

from __future__ import annotations

import os

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from psycopg import sql

from tenancy.bootstrap import RoleNames, bootstrap

LOGIN = "nudge_bootstrap_probe"


def _admin_url() -> str:
    """An admin connection to the server the tests use."""
    if os.environ.get("NUDGE_TEST_ADMIN_URL"):
        return os.environ["NUDGE_TEST_ADMIN_URL"]
    if settings.EMBEDDED_DATABASE:
        return f"postgresql://postgres:@/postgres?host={settings.DATABASES['default']['HOST']}"
    pytest.skip("set NUDGE_TEST_ADMIN_URL to test bootstrap_db against this server")


def _role(cur, name: str) -> tuple:
    cur.execute(
        "SELECT rolcanlogin, rolinherit, rolsuper, rolbypassrls, rolcreatedb "
        "FROM pg_roles WHERE rolname = %s",
        [name],
    )
    return cur.fetchone()


@pytest.fixture
def admin():
    url = _admin_url()
    yield url
    roles = RoleNames.for_login(LOGIN)
    with psycopg.connect(url, autocommit=True) as conn:
        for database in (LOGIN, f"{LOGIN}_template"):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)))
        for role in (roles.login, roles.sweeper, roles.support):
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_bootstrap_is_idempotent_and_repairs_a_widened_role(admin):
    roles = bootstrap(admin, login=LOGIN, password="s3cret", database=LOGIN)
    bootstrap(admin, login=LOGIN, password="s3cret", database=LOGIN)  # twice: no error
    with psycopg.connect(admin, autocommit=True) as conn, conn.cursor() as cur:
        assert _role(cur, roles.login) == (True, False, False, False, True)
        assert _role(cur, roles.sweeper) == (False, False, False, False, False)
        assert _role(cur, roles.support) == (False, False, False, False, False)
        cur.execute(
            "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname LIKE %s",
            [f"{LOGIN}%"],
        )
        assert sorted(cur.fetchall()) == [(LOGIN, LOGIN), (f"{LOGIN}_template", LOGIN)]
        # Someone widens the role by hand; bootstrap puts it back.
        cur.execute(sql.SQL("ALTER ROLE {} BYPASSRLS INHERIT").format(sql.Identifier(LOGIN)))
    bootstrap(admin, login=LOGIN, password="s3cret", database=LOGIN)
    with psycopg.connect(admin, autocommit=True) as conn, conn.cursor() as cur:
        assert _role(cur, roles.login) == (True, False, False, False, True)


def test_the_login_role_can_create_tables_in_its_database(admin):
    """A NOINHERIT role loses pg_database_owner's rights on PostgreSQL 15+."""
    bootstrap(admin, login=LOGIN, password=None, database=LOGIN)
    params = psycopg.conninfo.conninfo_to_dict(admin)
    params.update(user=LOGIN, dbname=LOGIN, password="")
    with psycopg.connect(psycopg.conninfo.make_conninfo(**params), autocommit=True) as conn:
        conn.execute("CREATE TABLE probe (id int)")
        conn.execute("SET ROLE nudge_bootstrap_probe_sweeper")  # membership lets it enter
        conn.execute("RESET ROLE")


def test_the_command_reports_what_it_made(admin, capsys, settings):
    settings.DATABASES = {
        "default": {**settings.DATABASES["default"], "USER": LOGIN, "NAME": LOGIN}
    }
    call_command("bootstrap_db", "--admin-url", admin)
    out = capsys.readouterr().out
    assert f"role {LOGIN} (login, NOINHERIT, no superuser, no BYPASSRLS)" in out
    assert f"databases {LOGIN} and {LOGIN}_template — ready" in out
