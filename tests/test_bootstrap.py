"""bootstrap_db creates or repairs roles and databases, idempotently."""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tenancy.bootstrap import RoleNames, bootstrap
from tests.conftest import admin_url

# Derived from the suite's own role, so runs for different roles never collide.
LOGIN = f"{settings.NUDGE_DB_LOGIN_ROLE}_bootstrap_probe"
ROLES = RoleNames.for_login(LOGIN)


def _role(cur, name: str) -> tuple:
    cur.execute(
        "SELECT rolcanlogin, rolinherit, rolsuper, rolbypassrls, rolcreatedb "
        "FROM pg_roles WHERE rolname = %s",
        [name],
    )
    return cur.fetchone()


def _connect_as(admin: str, user: str) -> psycopg.Connection:
    params = conninfo_to_dict(admin)
    params.update(user=user, dbname=LOGIN, password="")
    return psycopg.connect(make_conninfo(**params), autocommit=True)


@pytest.fixture
def admin():
    url = admin_url()
    yield url
    with psycopg.connect(url, autocommit=True) as conn:
        for database in (LOGIN, f"{LOGIN}_template"):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)))
        for role in (ROLES.login, ROLES.owner, *ROLES.entered_by_login):
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_bootstrap_is_idempotent_and_repairs_a_widened_role(admin):
    bootstrap(admin, login=LOGIN, password="s3cret", database=LOGIN)
    bootstrap(admin, login=LOGIN, password="s3cret", database=LOGIN)  # twice: no error
    with psycopg.connect(admin, autocommit=True) as conn, conn.cursor() as cur:
        assert _role(cur, ROLES.login) == (True, False, False, False, False)
        assert _role(cur, ROLES.owner) == (True, False, False, False, True)
        assert _role(cur, ROLES.sweeper) == (False, False, False, False, False)
        assert _role(cur, ROLES.support) == (False, False, False, False, False)
        assert _role(cur, ROLES.planner) == (False, False, False, False, False)
        cur.execute(
            "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname LIKE %s",
            [f"{LOGIN}%"],
        )
        assert sorted(cur.fetchall()) == [(LOGIN, ROLES.owner), (f"{LOGIN}_template", ROLES.owner)]
        # Someone widens the role by hand; bootstrap puts it back.
        cur.execute(sql.SQL("ALTER ROLE {} BYPASSRLS INHERIT").format(sql.Identifier(LOGIN)))
    bootstrap(admin, login=LOGIN, password="s3cret", database=LOGIN)
    with psycopg.connect(admin, autocommit=True) as conn, conn.cursor() as cur:
        assert _role(cur, ROLES.login) == (True, False, False, False, False)


def test_only_the_owner_can_create_tables_and_the_login_role_enters_only_its_roles(admin):
    """A NOINHERIT role loses pg_database_owner's rights on PostgreSQL 15+: granted back
    to the owner explicitly, and to the login role not at all."""
    bootstrap(admin, login=LOGIN, password=None, database=LOGIN)
    with _connect_as(admin, ROLES.owner) as conn:
        conn.execute("CREATE TABLE probe (id int)")
    with _connect_as(admin, ROLES.login) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE probe2 (id int)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(ROLES.owner)))
        for role in ROLES.entered_by_login:  # membership lets it enter these
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            conn.execute("RESET ROLE")


def test_bootstrap_moves_the_old_layout_to_the_owner_and_undoes_widening(admin):
    """Before the owner role, the login role owned the tables; and anything a role can
    do to itself or be granted by hand is put back on the next run."""
    bootstrap(admin, login=LOGIN, password=None, database=LOGIN)
    login, owner = sql.Identifier(ROLES.login), sql.Identifier(ROLES.owner)
    params = conninfo_to_dict(admin)
    params["dbname"] = LOGIN
    with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
        conn.execute("CREATE TABLE legacy (id int)")
        conn.execute(sql.SQL("ALTER TABLE legacy OWNER TO {}").format(login))
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(LOGIN), login))
        conn.execute(sql.SQL("GRANT {} TO {}").format(owner, login))
        conn.execute(sql.SQL("ALTER ROLE {} SET role = {}").format(login, ROLES.sweeper))
        conn.execute(sql.SQL("ALTER ROLE {} SET app.current_user_id = '1'").format(login))
        conn.execute(sql.SQL("CREATE TABLE granted (id int)"))
        conn.execute(sql.SQL("GRANT TRUNCATE ON granted TO {}").format(login))
    bootstrap(admin, login=LOGIN, password=None, database=LOGIN)
    with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
        owners = conn.execute(
            "SELECT pg_get_userbyid(relowner), pg_get_userbyid(datdba) FROM pg_class, pg_database "
            "WHERE relname = 'legacy' AND datname = current_database()"
        ).fetchone()
        assert owners == (ROLES.owner, ROLES.owner)
        assert not conn.execute(
            "SELECT pg_has_role(%s, %s, 'MEMBER')", [ROLES.login, ROLES.owner]
        ).fetchone()[0]
        assert conn.execute(
            "SELECT count(*) FROM pg_db_role_setting WHERE setrole = %s::regrole",
            [ROLES.login],
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT has_table_privilege(%s, 'granted', 'TRUNCATE')", [ROLES.login]
        ).fetchone() == (False,)


def test_the_command_reports_what_it_made(admin, capsys, settings):
    settings.DATABASES = {
        "default": {**settings.DATABASES["default"], "USER": LOGIN, "NAME": LOGIN}
    }
    settings.NUDGE_DB_OWNER = {**settings.NUDGE_DB_OWNER, "USER": ROLES.owner, "PASSWORD": ""}
    call_command("bootstrap_db", "--admin-url", admin)
    out = capsys.readouterr().out
    assert f"role {LOGIN} (login, DML only, NOINHERIT, no superuser, no BYPASSRLS)" in out
    assert f"role {ROLES.owner} (owner, runs migrations)" in out
    assert f"databases {LOGIN} and {LOGIN}_template — ready" in out
