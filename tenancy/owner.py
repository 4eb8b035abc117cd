"""Connecting as the owner (migration) role, for the few jobs that change the schema: the
same Django connection's credentials are swapped for the block, then restored."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

_CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")


@contextmanager
def connected_as_owner(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Run the block on ``using`` connected as the owner role; nests harmlessly."""
    connection = connections[using]
    owner = settings.NUDGE_DB_OWNER
    if connection.settings_dict.get("USER") == owner["USER"]:
        yield
        return
    if connection.in_atomic_block:
        # Closing the connection would silently drop the caller's transaction.
        raise RuntimeError("cannot switch to the owner role inside a transaction")
    saved = {key: connection.settings_dict.get(key) for key in _CREDENTIALS}
    connection.close()
    connection.settings_dict.update(owner)
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)
