"""The embedded PostgreSQL used when ``DATABASE_URL`` is not set.

A fresh machine with only Python must run the whole product, and the product
*is* PostgreSQL features (row-level security, ``FOR UPDATE SKIP LOCKED``,
partial indexes) — SQLite would run a different program. ``pgserver`` ships
real PostgreSQL binaries in a wheel, so ``pip install`` is the only step. The
server listens on a Unix socket inside the checkout's ``var/`` folder (no port
to collide with), survives between commands (``cleanup_mode=None``: starting
a cluster per ``manage.py`` call would cost a second each time; ``manage.py
embedded_db stop`` stops it), and is bootstrapped with the same code as
``manage.py bootstrap_db`` so the application connects as the same DML-only
role it uses in production, and migrations run as the same separate owner
role (``nudge_owner``). Starting, repairing and stopping it:
``tenancy/embedded_server.py``.
"""

from __future__ import annotations

from pathlib import Path

from tenancy.embedded_server import DATABASE, LOGIN_ROLE


def database_settings(state_dir: Path) -> dict[str, str]:
    """Django connection settings for the embedded server; starts nothing.

    ``HOST`` stays empty here: the socket folder is known once the server runs,
    and the database backend (``tenancy/backend``) starts the server and fills
    ``HOST`` in on the first connection, from ``EMBEDDED_STATE_DIR``.
    """
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE,
        "USER": LOGIN_ROLE,
        "PASSWORD": "",
        "HOST": "",
        "PORT": "",
        "EMBEDDED_STATE_DIR": str(state_dir),
    }
