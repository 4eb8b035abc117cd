"""Django's PostgreSQL backend, with test databases created and dropped by the owner
role (the login role has no CREATEDB and owns nothing), and the embedded server's
socket folder (``EMBEDDED_STATE_DIR``) resolved, starting it, on the first connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db.backends.postgresql import base, client, creation

from tenancy import embedded_server
from tenancy.owner import connected_as_owner


class DatabaseCreation(creation.DatabaseCreation):
    def create_test_db(self, *args, **kwargs):
        with connected_as_owner(self.connection.alias):
            return super().create_test_db(*args, **kwargs)

    def destroy_test_db(self, *args, **kwargs):
        with connected_as_owner(self.connection.alias):
            return super().destroy_test_db(*args, **kwargs)


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters: list[str]) -> None:
        """``manage.py dbshell``: psql is given ``HOST``, so resolve it first."""
        self.connection.get_connection_params()
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation
    client_class = DatabaseClient

    def get_connection_params(self) -> dict[str, Any]:
        """Django's parameters; on the embedded server, its socket folder as ``host``
        (started first if need be) — and in ``settings_dict["HOST"]`` from then on."""
        state_dir = self.settings_dict.get("EMBEDDED_STATE_DIR")
        if state_dir:
            self.settings_dict["HOST"] = embedded_server.socket_dir(Path(state_dir))
        return super().get_connection_params()
