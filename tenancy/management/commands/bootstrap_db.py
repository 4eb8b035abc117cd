from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from psycopg import Error as PsycopgError

from core.command_line import NudgeCommand
from tenancy.bootstrap import bootstrap, template_database_name


class Command(NudgeCommand):
    help = (
        "Create or repair, idempotently, the DML-only login role and database named in "
        "DATABASE_URL, the owner (migration) role of DATABASE_OWNER_URL, the sweeper, "
        "support and planner roles, and the test template database, from an admin connection "
        "to a real PostgreSQL server."
    )
    requires_system_checks: list[str] = []  # the database may not exist yet

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--admin-url",
            required=True,
            help="A connection URL for a superuser (or CREATEROLE + CREATEDB) on the same server.",
        )

    def handle(self, *args, admin_url: str, **options) -> None:
        database = settings.DATABASES["default"]
        login, name = database["USER"], database["NAME"]
        if not login or not name:
            raise CommandError("DATABASE_URL must name both a user and a database.")
        try:
            roles = bootstrap(
                admin_url,
                login=login,
                password=database.get("PASSWORD") or None,
                database=name,
                owner=settings.NUDGE_DB_OWNER["USER"],
                owner_password=settings.NUDGE_DB_OWNER["PASSWORD"] or None,
            )
        except PsycopgError as exc:
            # psycopg's messages span lines (server, hint); the operator gets one.
            raise CommandError(f"bootstrap failed: {' '.join(str(exc).split())}") from None
        self.stdout.write(
            f"bootstrap_db: role {roles.login} (login, DML only, NOINHERIT, no superuser, "
            f"no BYPASSRLS), role {roles.owner} (owner, runs migrations), "
            f"roles {roles.sweeper}, {roles.support} and {roles.planner} (NOLOGIN), "
            f"databases {name} and {template_database_name(name)} — ready"
        )
