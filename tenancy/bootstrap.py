"""Create or repair, idempotently from an admin connection, the roles and databases
(docs/ARCHITECTURE.md, "Tenant isolation"): none is a superuser or BYPASSRLS, and each run
also repairs memberships, session defaults, ownership, and TRUNCATE, REFERENCES and TRIGGER
grants. Plain psycopg: the embedded server calls it before Django's first connection.
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
    """The database that test databases are copied from."""
    return f"{database}_template"


def _ensure_role(
    cur: psycopg.Cursor, name: str, *, login: bool, createdb: bool, password: str | None
) -> None:
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name])
    verb = "ALTER" if cur.fetchone() else "CREATE"
    # Repaired every run: a SUPERUSER or BYPASSRLS role makes every policy decorative.
    options = [
        "LOGIN" if login else "NOLOGIN",
        "NOINHERIT",
        "NOSUPERUSER",
        "NOBYPASSRLS",
        "NOCREATEROLE",
        "CREATEDB" if createdb else "NOCREATEDB",
    ]
    statement = sql.SQL(f"{verb} ROLE {{}} {' '.join(options)}").format(sql.Identifier(name))
    if password:
        statement = sql.SQL("{} PASSWORD {}").format(statement, sql.Literal(password))
    cur.execute(statement)


def _execute(target: psycopg.Cursor | psycopg.Connection, template: str, *names: str) -> None:
    """``template`` with each ``{}`` filled by the next name, quoted as an identifier."""
    target.execute(sql.SQL(template).format(*(sql.Identifier(name) for name in names)))


def _repair_memberships(cur: psycopg.Cursor, roles: RoleNames) -> None:
    """The login role is a member of the sweeper, support and planner roles only."""
    for member_of in roles.entered_by_login:
        # NOINHERIT: membership only lets the login role enter them with SET ROLE.
        _execute(cur, "GRANT {} TO {}", member_of, roles.login)
    cur.execute(
        "SELECT r.rolname, m.admin_option FROM pg_auth_members m "
        "JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid = m.member "
        "WHERE u.rolname = %s",
        [roles.login],
    )
    for granted, admin_option in cur.fetchall():
        if granted not in roles.entered_by_login:
            _execute(cur, "REVOKE {} FROM {}", granted, roles.login)
        elif admin_option:
            _execute(cur, "REVOKE ADMIN OPTION FOR {} FROM {}", granted, roles.login)
    # Whoever could become the owner could alter its tables.
    cur.execute(
        "SELECT u.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
        "JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = %s",
        [roles.owner],
    )
    for (member,) in cur.fetchall():
        _execute(cur, "REVOKE {} FROM {}", roles.owner, member)


def refused_session_defaults(cur, roles: list[str], databases: list[str]) -> list[tuple]:
    """Defaults of ``roles`` (in any database) or of ``databases`` (for every role) that set
    one of ``SESSION_SETTINGS_REFUSED``: (database or None, role or None, "name=value")."""
    cur.execute(
        "SELECT d.datname, r.rolname, c "
        "FROM pg_db_role_setting s CROSS JOIN unnest(s.setconfig) AS c "
        "LEFT JOIN pg_database d ON d.oid = s.setdatabase "
        "LEFT JOIN pg_roles r ON r.oid = s.setrole "
        "WHERE (r.rolname = ANY(%s) OR (s.setrole = 0 AND d.datname = ANY(%s))) "
        "  AND split_part(c, '=', 1) LIKE ANY(%s) ORDER BY 1, 2, 3",
        [roles, databases, list(SESSION_SETTINGS_REFUSED)],
    )
    return cur.fetchall()


def _reset_session_settings(cur: psycopg.Cursor, roles: RoleNames, databases: list[str]) -> None:
    for database, role, setting in refused_session_defaults(
        cur, list(vars(roles).values()), databases
    ):
        name = setting.split("=", 1)[0]
        if role is None:
            _execute(cur, "ALTER DATABASE {} RESET {}", database, name)
        elif database is None:
            _execute(cur, "ALTER ROLE {} RESET {}", role, name)
        else:
            _execute(cur, "ALTER ROLE {} IN DATABASE {} RESET {}", role, database, name)


def _ensure_database(cur: psycopg.Cursor, name: str, owner: str) -> None:
    cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    if cur.fetchone():
        _execute(cur, "ALTER DATABASE {} OWNER TO {}", name, owner)
    else:
        _execute(cur, "CREATE DATABASE {} OWNER {} ENCODING 'UTF8' TEMPLATE template0", name, owner)


def _repair_database(admin_url: str, database: str, roles: RoleNames) -> None:
    """Inside one database: ownership to the owner role, and the schema's grants."""
    params = conninfo_to_dict(admin_url)
    params["dbname"] = database
    login, owner = roles.login, roles.owner
    runtime = (login, *roles.entered_by_login)  # the login role and the roles it may enter
    listed = ", ".join(["{}"] * len(runtime))
    with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
        # The login role owns nothing: whatever it owns goes to the owner.
        _execute(conn, "REASSIGN OWNED BY {} TO {}", login, owner)
        _execute(conn, "GRANT USAGE, CREATE ON SCHEMA public TO {}", owner)
        _execute(conn, "REVOKE CREATE ON SCHEMA public FROM {}, PUBLIC", login)
        _execute(conn, f"GRANT USAGE ON SCHEMA public TO {listed}", *runtime)
        _execute(conn, "REVOKE CREATE ON DATABASE {} FROM {}, PUBLIC", database, login)
        # TRUNCATE skips row-level security; REFERENCES and TRIGGER are schema work.
        _execute(
            conn,
            f"REVOKE TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA public FROM {listed}",
            *runtime,
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
        for entered in roles.entered_by_login:
            _ensure_role(cur, entered, login=False, createdb=False, password=None)
        _repair_memberships(cur, roles)
        _reset_session_settings(cur, roles, databases)
        for name in databases:
            _ensure_database(cur, name, roles.owner)
    for name in databases:
        _repair_database(admin_url, name, roles)
    return roles
