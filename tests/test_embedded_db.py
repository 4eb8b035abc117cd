"""Issue 24, the first hour: "how to stop the embedded database" — ``manage.py
embedded_db stop`` stops a running embedded cluster, and says so when there is none."""

from __future__ import annotations

import shutil
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tenancy import embedded_server

STATE = Path(__file__).resolve().parents[1] / "var"


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
