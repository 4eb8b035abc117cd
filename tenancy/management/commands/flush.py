"""``manage.py flush``, connected as the owner role: ``TRUNCATE`` skips row-level
security, so the login role is not allowed it (see ``tenancy/owner.py``)."""

from __future__ import annotations

from django.core.management.commands import flush

from tenancy.owner import connected_as_owner


class Command(flush.Command):
    def handle(self, *args, **options):
        with connected_as_owner(options["database"]):
            return super().handle(*args, **options)
