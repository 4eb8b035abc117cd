"""The embedded PostgreSQL used when ``DATABASE_URL`` is not set.

A fresh machine with only Python must run the whole product, and the product
*is* PostgreSQL features (row-level security, ``FOR UPDATE SKIP LOCKED``,
partial indexes) — SQLite would run a different program. ``pgserver`` ships
real PostgreSQL binaries in a wheel, so ``pip install`` is the only step. The
server listens on a Unix socket inside the checkout's ``var/`` folder (no port
to collide with), survives between commands (``cleanup_mode=None``: starting
a cluster per ``manage.py`` call would cost a second each time; ``manage.py
embedded_db stop`` stops it, ``tenancy/embedded_server.py``), and is
bootstrapped with the same code as ``manage.py bootstrap_db`` so the
application connects as the same DML-only role it uses in production, and
migrations run as the same separate owner role (``nudge_owner``).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tenancy.bootstrap import bootstrap
from tenancy.embedded_server import data_dir as cluster_dir

LOGIN_ROLE = "nudge"
DATABASE = "nudge"
# Bump when bootstrap() changes, so existing embedded clusters get repaired.
BOOTSTRAP_VERSION = "3"


def _bootstrap_stamp(data_dir: Path) -> Path:
    return data_dir / ".nudge-bootstrap"


@contextmanager
def _one_at_a_time(state_dir: Path) -> Iterator[None]:
    """Let one process at a time start and bootstrap the cluster.

    Several processes may load the settings at once on a fresh checkout (the
    test suite's workers, say): one creates the data directory, runs initdb and
    the bootstrap, and the others wait and then find it all done.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: pgserver's own lock covers the start
        yield
        return
    with open(state_dir / "pgdata.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def database_settings(state_dir: Path) -> dict[str, str]:
    """Start (or reuse) the embedded server and return Django connection settings."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), _one_at_a_time(state_dir):
        # platformdirs warns when XDG_RUNTIME_DIR is unset (cron, containers);
        # pgserver then falls back to /tmp, which is fine for its lock file.
        warnings.simplefilter("ignore")
        import pgserver

        data_dir = cluster_dir(state_dir)
        server = pgserver.get_server(data_dir, cleanup_mode=None)
        socket_dir = server.get_postmaster_info().socket_dir
        stamp = _bootstrap_stamp(state_dir)
        expected = hashlib.sha256(f"{BOOTSTRAP_VERSION}:{data_dir}".encode()).hexdigest()
        if not stamp.exists() or stamp.read_text() != expected:
            bootstrap(server.get_uri(), login=LOGIN_ROLE, password=None, database=DATABASE)
            stamp.write_text(expected)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE,
        "USER": LOGIN_ROLE,
        "PASSWORD": "",
        "HOST": str(socket_dir),
        "PORT": "",
    }
