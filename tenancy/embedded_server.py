"""Stopping and inspecting the embedded PostgreSQL of a development checkout.

The embedded server (``nudgeproject/embedded_postgres.py``) starts on first
use and keeps running between commands, so something must stop it: a
developer done for the day, or about to delete ``var/``. ``pg_ctl`` from the
``pgserver`` wheel does it, as the same system user the server runs as (a
``pgserver`` user when the checkout is used as root).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

DATA_DIR_NAME = "pgdata"


def data_dir(state_dir: Path) -> Path:
    """Where the embedded cluster keeps its files, inside the checkout's ``var/``."""
    return state_dir / DATA_DIR_NAME


def _pg_ctl(args: list[str], pgdata: Path) -> subprocess.CompletedProcess:
    import pgserver._commands as commands  # the wheel's own binaries; imported only here

    user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
    return subprocess.run(  # noqa: S603 - the wheel's pg_ctl, arguments of our own
        [str(commands.POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), *args],
        capture_output=True,
        text=True,
        timeout=60,
        user=user,
    )


def running(pgdata: Path) -> bool:
    """Whether a server runs on this data directory (``pg_ctl status``)."""
    return pgdata.is_dir() and _pg_ctl(["status"], pgdata).returncode == 0


def stop(pgdata: Path) -> str:
    """Stop the server on ``pgdata`` (fast: open sessions are ended); a sentence saying so."""
    if not running(pgdata):
        return "the embedded PostgreSQL is not running"
    done = _pg_ctl(["-m", "fast", "-w", "stop"], pgdata)
    if done.returncode != 0:
        raise RuntimeError(f"pg_ctl stop failed: {(done.stderr or done.stdout).strip()}")
    return "the embedded PostgreSQL has stopped; the next manage.py command starts it again"
