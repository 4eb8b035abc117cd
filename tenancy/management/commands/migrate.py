"""``manage.py migrate``, connected as the owner role (see ``tenancy/owner.py``)."""

from __future__ import annotations

from django.core.management.commands import migrate

from tenancy.owner import connected_as_owner


class Command(migrate.Command):
    def handle(self, *args, **options):
        with connected_as_owner(options["database"]):
            return super().handle(*args, **options)
