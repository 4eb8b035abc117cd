"""Django's PostgreSQL backend, with test databases created by the owner role.

The login role has no CREATEDB and owns nothing, so creating a test database
from ``<database>_template``, migrating it and dropping it afterwards happen as
the owner role (``tenancy/owner.py``) — the same layout as production: the
test suite then runs as the DML-only login role against tables it does not own.
"""

from __future__ import annotations

from django.db.backends.postgresql import base, creation

from tenancy.owner import connected_as_owner


class DatabaseCreation(creation.DatabaseCreation):
    def create_test_db(self, *args, **kwargs):
        with connected_as_owner(self.connection.alias):
            return super().create_test_db(*args, **kwargs)

    def destroy_test_db(self, *args, **kwargs):
        with connected_as_owner(self.connection.alias):
            return super().destroy_test_db(*args, **kwargs)


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation
