"""``manage.py migrate``, connected as the owner role (see ``tenancy/owner.py``)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands import migrate
from django.db import OperationalError, connections

from tenancy.owner import connected_as_owner


class Command(migrate.Command):
    # Checks run below, on the owner's connection, where the RLS check looks at
    # the roles only: the schema is what this command is about to change.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--skip-checks", action="store_true", help="Skip system checks.")

    def handle(self, *args, **options):
        with connected_as_owner(options["database"]):
            try:
                connections[options["database"]].ensure_connection()
            except OperationalError as exc:
                reason = (
                    str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                )
                raise CommandError(
                    f"cannot connect as the owner role {settings.NUDGE_DB_OWNER_ROLE!r} "
                    f"(DATABASE_OWNER_URL; `manage.py bootstrap_db` creates it): {reason}"
                ) from None
            if not options.get("skip_checks"):
                self.check(databases=[options["database"]])
            return super().handle(*args, **options)
