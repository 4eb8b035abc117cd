"""``manage.py migrate``, connected as the owner role (see ``tenancy/owner.py``)."""

from __future__ import annotations

from django.core.management.commands import migrate

from tenancy.owner import connected_as_owner


class Command(migrate.Command):
    # The system checks run below, on the owner's connection, where the RLS
    # check looks at the roles only: the schema is what this command is about
    # to change (a database that predates a grant-narrowing migration must
    # still be able to apply it).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--skip-checks", action="store_true", help="Skip system checks.")

    def handle(self, *args, **options):
        with connected_as_owner(options["database"]):
            if not options.get("skip_checks"):
                self.check(databases=[options["database"]])
            return super().handle(*args, **options)
