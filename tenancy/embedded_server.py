"""The embedded PostgreSQL (the ``pgserver`` wheel) of a development checkout, used when
``DATABASE_URL`` is unset: in ``var/pgdata`` on a Unix socket, started on a process's
first connection (``tenancy/backend``), bootstrapped like ``manage.py bootstrap_db``.
Every start, bootstrap and repair holds one file lock in ``var/`` (pgserver's own lock
lives in the user's runtime folder, which cron or a container may see elsewhere).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import warnings
from pathlib import Path
from types import ModuleType

from tenancy.bootstrap import bootstrap

logger = logging.getLogger("nudge.embedded_db")

DATA_DIR_NAME = "pgdata"
LOCK_FILE_NAME = "pgdata.lock"
# pgserver's list of the processes holding a handle on the server (JSON list of pids).
HANDLE_LIST_NAME = ".handle_pids.json"
LOGIN_ROLE = "nudge"
DATABASE = "nudge"
# Bump when bootstrap() changes, so existing embedded clusters get repaired.
BOOTSTRAP_VERSION = "3"


def database_settings(state_dir: Path) -> dict[str, str]:
    """Django connection settings for the embedded server; starts nothing (``HOST`` is
    filled in on the first connection, by ``tenancy/backend``)."""
    return {"NAME": DATABASE, "USER": LOGIN_ROLE, "EMBEDDED_STATE_DIR": str(state_dir)}


def data_dir(state_dir: Path) -> Path:
    return state_dir / DATA_DIR_NAME


def repair_handle_list(pgdata: Path) -> bool:
    """Rewrite pgserver's handle list as ``[]`` when it is not a JSON list of pids (a
    process killed mid-rewrite leaves it broken, and every ``get_server()`` fails). The
    list only says who stops the server, which pgserver never does here
    (``cleanup_mode=None``). Call under the checkout's lock; whether it was rewritten."""
    path = pgdata / HANDLE_LIST_NAME
    try:
        pids = json.loads(path.read_text())
    except FileNotFoundError:
        return False
    except ValueError:  # empty, truncated or not JSON (JSONDecodeError, bad UTF-8)
        pids = None
    if isinstance(pids, list) and all(type(pid) is int for pid in pids):
        return False
    replacement = path.with_name(f"{HANDLE_LIST_NAME}.{os.getpid()}.tmp")
    replacement.write_text("[]")
    replacement.replace(path)  # atomic: a reader sees the old file or the new one
    logger.warning("embedded PostgreSQL: repaired an unreadable %s", path)
    return True


def _bootstrap_stamp(pgdata: Path) -> tuple[Path, str]:
    """Where the bootstrap's stamp is kept, and what it says once this version ran there."""
    return pgdata / ".nudge-bootstrap", f"{BOOTSTRAP_VERSION}:{pgdata.resolve()}"


def _bootstrapped(pgdata: Path) -> bool:
    stamp, expected = _bootstrap_stamp(pgdata)
    try:
        return stamp.read_text() == expected
    except OSError:
        return False


def _ready_socket_dir(pgdata: Path) -> str | None:
    """The socket folder of a server accepting connections on ``pgdata`` (pgserver's
    reading of its ``postmaster.pid``), else None."""
    try:
        info = _pgserver().utils.PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):  # being written: not ready
        return None
    if info is None or info.status != "ready" or not info.is_running():
        return None
    if info.socket_path is None or not info.socket_path.exists():
        return None
    return str(info.socket_dir)


def socket_dir(state_dir: Path) -> str:
    """The embedded server's socket folder; otherwise, under the checkout's lock, the cluster
    is created or started and bootstrapped as ``manage.py bootstrap_db`` does."""
    pgdata = data_dir(state_dir)
    ready = _ready_socket_dir(pgdata)
    if ready and _bootstrapped(pgdata):
        return ready
    import fcntl  # POSIX, as the Unix socket the server listens on

    state_dir.mkdir(parents=True, exist_ok=True)
    # On a fresh checkout one process creates and bootstraps the cluster; the others wait.
    with open(state_dir / LOCK_FILE_NAME, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        ready = _ready_socket_dir(pgdata) or _start(state_dir)
        if not _bootstrapped(pgdata):
            uri = f"postgresql://postgres:@/postgres?host={ready}"
            bootstrap(uri, login=LOGIN_ROLE, password=None, database=DATABASE)
            stamp, expected = _bootstrap_stamp(pgdata)
            stamp.write_text(expected)
    return ready


def _pgserver() -> ModuleType:
    """The wheel, imported when needed, without platformdirs' warning that
    ``XDG_RUNTIME_DIR`` is unset (cron, containers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        import pgserver._commands
        import pgserver.utils

    return pgserver


def _start(state_dir: Path) -> str:
    """Create or start the cluster through pgserver, under the lock; its socket folder."""
    pgserver = _pgserver()
    pgdata = data_dir(state_dir)
    if pgdata.is_dir():
        repair_handle_list(pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    # A process that started the server before keeps pgserver's handle; if the
    # server was stopped since, this starts it again.
    server.ensure_postgres_running()
    # pgserver's exit hook would rewrite the handle list outside the lock; nothing here
    # asks pgserver to stop the server, so this process leaves the list now, under it.
    atexit.unregister(server._cleanup)
    server._cleanup()
    return str(server.get_postmaster_info().socket_dir)


def _pg_ctl(args: list[str], pgdata: Path) -> subprocess.CompletedProcess:
    commands = _pgserver()._commands  # the wheel's own binaries
    user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
    return subprocess.run(  # noqa: S603 - the wheel's pg_ctl, arguments of our own
        [str(commands.POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), *args],
        capture_output=True,
        text=True,
        timeout=60,
        user=user,
    )


def running(pgdata: Path) -> bool:
    """Whether a server runs on this data directory (``pg_ctl status``); starts nothing."""
    return pgdata.is_dir() and _pg_ctl(["status"], pgdata).returncode == 0


def stop(pgdata: Path) -> str:
    """Stop the server on ``pgdata`` (fast: open sessions are ended); a sentence saying so."""
    if not running(pgdata):
        return "the embedded PostgreSQL is not running"
    done = _pg_ctl(["-m", "fast", "-w", "stop"], pgdata)
    if done.returncode != 0:
        raise RuntimeError(f"pg_ctl stop failed: {(done.stderr or done.stdout).strip()}")
    return "the embedded PostgreSQL has stopped; the next manage.py command starts it again"
