"""``manage.py migrate``, connected as the owner role (see ``tenancy/owner.py``)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands import migrate
from django.db import OperationalError, connections

from tenancy.owner import connected_as_owner


class Command(migrate.Command):
    def execute(self, *args, **options):
        """The system checks too run on the owner's connection, where the RLS check looks
        at the roles only: the schema is what this command is about to change."""
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
            return super().execute(*args, **options)
