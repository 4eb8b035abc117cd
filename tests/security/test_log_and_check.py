"""What reaches the service log, and ``manage.py check`` connected as a superuser."""

from __future__ import annotations

import logging
import subprocess
import sys
from urllib.parse import quote

import pytest
from django.db import connection

from core.log_format import KeyValueFormatter
from providers import ics_parse
from providers.base import FetchResult
from tests.conftest import admin_url
from tests.support.processes import PROJECT_ROOT, subprocess_env

FORGED = "2026-12-03 10:00:00,000 ERROR nudge.deliver deliver failed: everything"


def test_a_feed_uid_with_a_newline_cannot_forge_a_log_line(caplog):
    """issue 23 item 8: a feed's UID containing a newline wrote a forged line into the
    service log."""
    caplog.set_level(logging.WARNING, logger="nudge.calendars")
    ics_parse.note(FetchResult(changed=True), f"evil-uid\n{FORGED}\r\u2028", "skipped: no start")
    [record] = [r for r in caplog.records if "evil-uid" in r.getMessage()]
    record.detail = f"also in a field\n{FORGED}"  # as an extra={...} field would arrive
    line = KeyValueFormatter().format(record)
    assert "\n" not in line and "\r" not in line and "\u2028" not in line
    assert "evil-uid\\n2026-12-03" in line  # escaped, still readable


def test_a_traceback_keeps_its_lines_but_none_starts_a_record():
    """issue 23 item 8: control characters are escaped in every field, tracebacks too."""
    try:
        raise ValueError(f"bad uid\n{FORGED}")
    except ValueError:
        record = logging.LogRecord("nudge", logging.ERROR, "", 0, "failed", (), sys.exc_info())
    first, *rest = KeyValueFormatter().format(record).split("\n")
    assert first.endswith("ERROR nudge failed")
    assert rest and all(line.startswith("  ") for line in rest)


@pytest.mark.django_db
def test_check_connected_as_a_superuser_fails_and_says_so():
    """issue 23 item 8: connected as a PostgreSQL superuser, `check` only warned ("could
    not verify row-level security") when the support role was missing, and exited 0."""
    admin = admin_url()  # skips unless a superuser connection is available
    superuser = admin.split("://", 1)[1].split("@", 1)[0].split(":", 1)[0] or "postgres"
    database = connection.settings_dict["NAME"]
    if "?" in admin:
        url = admin.replace("/postgres?", f"/{quote(database)}?", 1)
    else:
        url = admin.rsplit("/", 1)[0] + f"/{quote(database)}"
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "manage.py"), "check"],
        cwd=PROJECT_ROOT,
        env=subprocess_env(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0, result.stdout + result.stderr
    assert f"connected to PostgreSQL as '{superuser}', a superuser" in result.stderr
