"""Create or repair the database roles and databases the application needs.

Runs from an *admin* connection (a superuser, or a role with CREATEROLE and
CREATEDB) and is idempotent: running it twice, or against a half-built
server, converges on the same state. It is plain psycopg with no Django
imports because the embedded default calls it while settings are loading.

The roles, and why there are four:

* the **owner role** (``<login>_owner``, or the user of ``DATABASE_OWNER_URL``)
  owns the databases and every table. Only ``migrate``, ``flush`` and the
  test-database set-up connect as it (``tenancy/owner.py``). It is a login
  role, never a superuser, never BYPASSRLS, and nobody is a member of it.
* the **login role** (the user in ``DATABASE_URL``) is what the application
  runs as: DML on the tables (granted by migration ``tenancy/0002``), nothing
  else — no ownership, no CREATE, no CREATEDB, so it cannot alter a table,
  rewrite a policy or turn row-level security off. It is never a superuser
  and never has BYPASSRLS. It is ``NOINHERIT`` so that the policies written
  ``TO`` the two roles below never apply to it by accident — only an explicit
  ``SET LOCAL ROLE`` enters them — and those three are the only roles it may
  enter.
* the **sweeper role** (NOLOGIN) carries the one permissive policy that lets the
  delivery claim and its settle-up see every tenant's queue rows.
* the **support role** (NOLOGIN) carries the staff admin's cross-tenant policies.
* the **planner role** (NOLOGIN) carries the policies that let materialize
  plan and queue a named set of users in one statement (``planning_scope``).

Repairs on every run: role attributes, memberships (the login role loses any
other; nobody keeps admin option), role- and database-level settings that
would pre-set a tenant or a role for every session, ownership (anything the
login role owns — the layout before the owner role existed — is handed to
the owner), and TRUNCATE/REFERENCES/TRIGGER grants to the three roles that
run application code. Policies and the DML grants are the migrations'.

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
    owner: str
    sweeper: str
    support: str
    planner: str

    @classmethod
    def for_login(cls, login: str, owner: str | None = None) -> RoleNames:
        return cls(
            login=login,
            owner=owner or f"{login}_owner",
            sweeper=f"{login}_sweeper",
            support=f"{login}_support",
            planner=f"{login}_planner",
        )

    @property
    def entered_by_login(self) -> tuple[str, str, str]:
        """The only roles the login role may SET ROLE into."""
        return (self.sweeper, self.support, self.planner)


# Settings that, fixed per role or per database, would apply to every session
# before any scope opens: a pre-set tenant or role, or row security turned off.
SESSION_SETTINGS_REFUSED = ("app.%", "role", "session_authorization", "row_security")


def template_database_name(database: str) -> str:
    """The database that test databases are copied from (see module docstring)."""
    return f"{database}_template"


def _ensure_role(
    cur: psycopg.Cursor, name: str, *, login: bool, createdb: bool, password: str | None
) -> None:
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
        "CREATEDB" if createdb else "NOCREATEDB",
    ]
    statement = sql.SQL("{verb} ROLE {name} " + " ".join(options)).format(
        verb=sql.SQL(verb), name=sql.Identifier(name)
    )
    if password:
        statement = sql.SQL("{} PASSWORD {}").format(statement, sql.Literal(password))
    cur.execute(statement)


def _repair_memberships(cur: psycopg.Cursor, roles: RoleNames) -> None:
    """The login role is a member of the sweeper, support and planner roles, and of
    nothing else."""
    for member_of in roles.entered_by_login:
        # Membership only lets the login role *enter* these roles with SET ROLE;
        # NOINHERIT means it never holds their privileges or policies otherwise.
        cur.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(member_of), sql.Identifier(roles.login))
        )
    cur.execute(
        "SELECT r.rolname, m.admin_option FROM pg_auth_members m "
        "JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid = m.member "
        "WHERE u.rolname = %s",
        [roles.login],
    )
    for granted, admin_option in cur.fetchall():
        if granted not in roles.entered_by_login:
            cur.execute(
                sql.SQL("REVOKE {} FROM {}").format(
                    sql.Identifier(granted), sql.Identifier(roles.login)
                )
            )
        elif admin_option:
            cur.execute(
                sql.SQL("REVOKE ADMIN OPTION FOR {} FROM {}").format(
                    sql.Identifier(granted), sql.Identifier(roles.login)
                )
            )
    # Whoever could become the owner could alter its tables.
    cur.execute(
        "SELECT u.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
        "JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = %s",
        [roles.owner],
    )
    for (member,) in cur.fetchall():
        cur.execute(
            sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(roles.owner), sql.Identifier(member))
        )


def _reset_session_settings(cur: psycopg.Cursor, roles: RoleNames, databases: list[str]) -> None:
    """Drop per-role and per-database defaults that would pre-set a tenant or role."""
    cur.execute(
        "SELECT d.datname, r.rolname, split_part(c, '=', 1) "
        "FROM pg_db_role_setting s CROSS JOIN unnest(s.setconfig) AS c "
        "LEFT JOIN pg_database d ON d.oid = s.setdatabase "
        "LEFT JOIN pg_roles r ON r.oid = s.setrole "
        "WHERE (r.rolname = ANY(%s) OR (s.setrole = 0 AND d.datname = ANY(%s))) "
        "  AND split_part(c, '=', 1) LIKE ANY(%s)",
        [list(vars(roles).values()), databases, list(SESSION_SETTINGS_REFUSED)],
    )
    for database, role, name in cur.fetchall():
        if role is None:
            target = sql.SQL("DATABASE {}").format(sql.Identifier(database))
        elif database is None:
            target = sql.SQL("ROLE {}").format(sql.Identifier(role))
        else:
            target = sql.SQL("ROLE {} IN DATABASE {}").format(
                sql.Identifier(role), sql.Identifier(database)
            )
        cur.execute(sql.SQL("ALTER {} RESET {}").format(target, sql.Identifier(name)))


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


def _repair_database(admin_url: str, database: str, roles: RoleNames) -> None:
    """Inside one database: ownership to the owner role, and the schema's grants."""
    params = conninfo_to_dict(admin_url)
    params["dbname"] = database
    login, owner = sql.Identifier(roles.login), sql.Identifier(roles.owner)
    with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
        # The layout before the owner role existed: the login role owned it all.
        conn.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(login, owner))
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(owner))
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}, PUBLIC").format(login))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA public TO {}, {}").format(
                login, sql.SQL(", ").join(sql.Identifier(name) for name in roles.entered_by_login)
            )
        )
        conn.execute(
            sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}, PUBLIC").format(
                sql.Identifier(database), login
            )
        )
        # TRUNCATE skips row-level security; REFERENCES and TRIGGER are schema
        # work. None of the roles that run application code needs them.
        conn.execute(
            sql.SQL(
                "REVOKE TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA public FROM {}"
            ).format(
                sql.SQL(", ").join(
                    sql.Identifier(name) for name in (roles.login, *roles.entered_by_login)
                )
            )
        )


def bootstrap(
    admin_url: str,
    *,
    login: str,
    password: str | None,
    database: str,
    owner: str | None = None,
    owner_password: str | None = None,
) -> RoleNames:
    """Create or repair the roles and databases; returns the role names used."""
    roles = RoleNames.for_login(login, owner)
    databases = [database, template_database_name(database)]
    with psycopg.connect(admin_url, autocommit=True) as conn, conn.cursor() as cur:
        _ensure_role(cur, roles.owner, login=True, createdb=True, password=owner_password)
        _ensure_role(cur, roles.login, login=True, createdb=False, password=password)
        _ensure_role(cur, roles.sweeper, login=False, createdb=False, password=None)
        _ensure_role(cur, roles.support, login=False, createdb=False, password=None)
        _ensure_role(cur, roles.planner, login=False, createdb=False, password=None)
        _repair_memberships(cur, roles)
        _reset_session_settings(cur, roles, databases)
        for name in databases:
            _ensure_database(cur, name, roles.owner)
    for name in databases:
        _repair_database(admin_url, name, roles)
    return roles
