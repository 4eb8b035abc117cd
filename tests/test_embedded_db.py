"""Issue 24, the first hour: "how to stop the embedded database" — ``manage.py
embedded_db stop`` stops a running embedded cluster, and says so when there is none.

The embedded server starts on a process's first connection, never at settings
load, so ``status`` can say "not running"; and its start repairs pgserver's
handle list when that is left empty or half-written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tenancy import embedded_server

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / "var"
# What would point a child at a server other than the embedded one.
FOREIGN_SERVER = (
    "DATABASE_URL",
    "DATABASE_OWNER_URL",
    "NUDGE_TEST_ADMIN_URL",
    "TEST_DATABASE_NAME",
)


@pytest.fixture
def spare_cluster():
    """A second embedded cluster of its own (never the one the suite runs on)."""
    pgserver = pytest.importorskip("pgserver")
    state_dir = STATE / f"test-embedded-{uuid.uuid4().hex[:8]}"
    pgdata = embedded_server.data_dir(state_dir)
    pgdata.parent.mkdir(parents=True)
    pgserver.get_server(pgdata, cleanup_mode=None)
    try:
        yield state_dir
    finally:
        if embedded_server.running(pgdata):
            embedded_server.stop(pgdata)
        shutil.rmtree(state_dir, ignore_errors=True)


def test_embedded_db_stop_stops_the_cluster(spare_cluster, settings):
    """Issue 24, the first hour: the README's way to stop the embedded PostgreSQL."""
    settings.EMBEDDED_DATABASE = True
    settings.STATE_DIR = spare_cluster
    pgdata = embedded_server.data_dir(spare_cluster)
    out = StringIO()
    call_command("embedded_db", "status", stdout=out)
    assert "the embedded PostgreSQL is running" in out.getvalue()
    call_command("embedded_db", "stop", stdout=out)
    assert "the embedded PostgreSQL has stopped" in out.getvalue()
    assert not embedded_server.running(pgdata)
    call_command("embedded_db", "stop", stdout=out)
    assert out.getvalue().rstrip().endswith("the embedded PostgreSQL is not running")


def test_embedded_db_refuses_with_a_database_url(settings):
    """Issue 24, the first hour: with DATABASE_URL set there is nothing embedded to stop."""
    settings.EMBEDDED_DATABASE = False
    with pytest.raises(CommandError, match="DATABASE_URL is set"):
        call_command("embedded_db", "stop", stdout=StringIO())


def _spare_manage(state_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``manage.py ARGS`` in a child on the embedded settings, pointed at ``state_dir``."""
    env = {name: value for name, value in os.environ.items() if name not in FOREIGN_SERVER}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.support.spare_cluster_settings",
            "NUDGE_SPARE_STATE_DIR": str(state_dir),
            "SECRET_KEY": "spare-cluster-test-key",
        }
    )
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize(
    ("content", "rewritten"),
    [
        ("", True),
        ("[4242, 17", True),
        ("{}", True),
        ('["4242"]', True),
        ("[4242, 17]", False),
    ],
)
def test_repair_handle_list_rewrites_only_what_pgserver_cannot_read(tmp_path, content, rewritten):
    handles = tmp_path / embedded_server.HANDLE_LIST_NAME
    handles.write_text(content)
    assert embedded_server.repair_handle_list(tmp_path) is rewritten
    assert json.loads(handles.read_text()) == ([] if rewritten else [4242, 17])
    assert not embedded_server.repair_handle_list(tmp_path / "absent")


@pytest.mark.parametrize("content", ["", "[1234, 56"], ids=["empty", "half-written"])
def test_an_unreadable_handle_list_is_repaired_and_manage_py_runs(spare_cluster, content):
    """The embedded server's start survives pgserver's handle list left empty or
    half-written (a process killed mid-write): a real ``manage.py`` child repairs
    it under the checkout's lock, starts the server and runs its command."""
    pgdata = embedded_server.data_dir(spare_cluster)
    embedded_server.stop(pgdata)
    handles = pgdata / embedded_server.HANDLE_LIST_NAME
    handles.write_text(content)
    with pytest.raises(ValueError):  # what pgserver's get_server() would meet
        json.loads(handles.read_text())

    done = _spare_manage(spare_cluster, "showmigrations", "tenancy")

    assert done.returncode == 0, done.stderr
    assert "[ ] 0001_support_role_grants" in done.stdout
    assert "repaired an unreadable" in done.stderr
    assert "JSONDecodeError" not in done.stderr
    assert isinstance(json.loads(handles.read_text()), list)
    assert embedded_server.running(pgdata)


def test_status_and_stop_start_nothing(spare_cluster):
    """``embedded_db status`` says a stopped server is stopped and leaves it so;
    so does ``stop``, and neither creates a cluster where there is none."""
    pgdata = embedded_server.data_dir(spare_cluster)
    embedded_server.stop(pgdata)

    status = _spare_manage(spare_cluster, "embedded_db", "status")
    assert status.returncode == 0, status.stderr
    assert "the embedded PostgreSQL is not running" in status.stdout
    assert not embedded_server.running(pgdata)
    stop = _spare_manage(spare_cluster, "embedded_db", "stop")
    assert "the embedded PostgreSQL is not running" in stop.stdout
    assert not embedded_server.running(pgdata)

    nowhere = spare_cluster / "never-started"
    status = _spare_manage(nowhere, "embedded_db", "status")
    assert "the embedded PostgreSQL is not running" in status.stdout, status.stderr
    assert not embedded_server.data_dir(nowhere).exists()
