"""Create or repair the database roles and databases the application needs.

Runs from an *admin* connection (a superuser, or a role with CREATEROLE and
CREATEDB) and is idempotent: running it twice, or against a half-built
server, converges on the same state. It is plain psycopg with no Django
imports because the embedded default calls it while settings are loading.

The roles, and why there are three:

* the **login role** (the user in ``DATABASE_URL``) owns the tables and is the
  role the application connects as. It is never a superuser and never has
  BYPASSRLS, so ``FORCE ROW LEVEL SECURITY`` binds it. It is ``NOINHERIT`` so
  that the policies written ``TO`` the two roles below never apply to it by
  accident — only an explicit ``SET LOCAL ROLE`` enters them.
* the **sweeper role** (NOLOGIN) carries the one permissive policy that lets the
  delivery claim and its settle-up see every tenant's queue rows.
* the **support role** (NOLOGIN) carries the staff admin's cross-tenant policies.

A ``NOINHERIT`` role also stops inheriting the implicit ``pg_database_owner``
role, so on PostgreSQL 15 it cannot create tables in ``public`` of its own
database until granted ``USAGE, CREATE`` there. Test databases are created
from ``<database>_template``, which carries that grant, for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo


@dataclass(frozen=True)
class RoleNames:
    login: str
    sweeper: str
    support: str

    @classmethod
    def for_login(cls, login: str) -> RoleNames:
        return cls(login=login, sweeper=f"{login}_sweeper", support=f"{login}_support")


def template_database_name(database: str) -> str:
    """The database that test databases are copied from (see module docstring)."""
    return f"{database}_template"


def _ensure_role(cur: psycopg.Cursor, name: str, *, login: bool, password: str | None) -> None:
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name])
    verb = "ALTER" if cur.fetchone() else "CREATE"
    # NOSUPERUSER / NOBYPASSRLS are repaired on every run: a role that somehow
    # gained them would make every policy decorative.
    options = [
        "LOGIN" if login else "NOLOGIN",
        "NOINHERIT",
        "NOSUPERUSER",
        "NOBYPASSRLS",
        "NOCREATEROLE",
        "CREATEDB" if login else "NOCREATEDB",
    ]
    statement = sql.SQL("{verb} ROLE {name} " + " ".join(options)).format(
        verb=sql.SQL(verb), name=sql.Identifier(name)
    )
    if password:
        statement = sql.SQL("{} PASSWORD {}").format(statement, sql.Literal(password))
    cur.execute(statement)


def _ensure_database(cur: psycopg.Cursor, name: str, owner: str) -> None:
    cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    if cur.fetchone():
        cur.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(name), sql.Identifier(owner)
            )
        )
    else:
        cur.execute(
            sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'UTF8' TEMPLATE template0").format(
                sql.Identifier(name), sql.Identifier(owner)
            )
        )


def _grant_schema(admin_url: str, database: str, roles: RoleNames) -> None:
    params = conninfo_to_dict(admin_url)
    params["dbname"] = database
    with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(
                sql.Identifier(roles.login)
            )
        )
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA public TO {}, {}").format(
                sql.Identifier(roles.sweeper), sql.Identifier(roles.support)
            )
        )


def bootstrap(admin_url: str, *, login: str, password: str | None, database: str) -> RoleNames:
    """Create or repair the roles and databases; returns the role names used."""
    roles = RoleNames.for_login(login)
    with psycopg.connect(admin_url, autocommit=True) as conn, conn.cursor() as cur:
        _ensure_role(cur, roles.login, login=True, password=password)
        _ensure_role(cur, roles.sweeper, login=False, password=None)
        _ensure_role(cur, roles.support, login=False, password=None)
        # Membership only lets the login role *enter* these roles with SET ROLE;
        # NOINHERIT means it never holds their privileges or policies otherwise.
        for member_of in (roles.sweeper, roles.support):
            cur.execute(
                sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(member_of), sql.Identifier(roles.login)
                )
            )
        for name in (database, template_database_name(database)):
            _ensure_database(cur, name, roles.login)
    for name in (database, template_database_name(database)):
        _grant_schema(admin_url, name, roles)
    return roles
