"""Run management commands in separate processes against the test database.

Several deliver workers are several processes in production, sharing no
memory; the concurrency tests do the same rather than simulate it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from core.config import TUNING_SETTINGS, TUNING_VARIABLE

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """A DATABASE_URL for the database this test run is using right now."""
    db = connection.settings_dict
    # The parameters, not the settings: the embedded server's socket folder is
    # known only once it runs (tenancy/backend).
    host = quote(connection.get_connection_params().get("host") or "", safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    return f"postgres://{quote(db['USER'], safe='')}{password}@{host}{port}/{db['NAME']}"


def with_tuning(environment: dict[str, str]) -> dict[str, str]:
    """A child process's environment with the tuning it names (``NUDGE_BATCH_SIZE="4"``)
    also in ``NUDGE_TUNING``; the names stay, for an older commit that read them."""
    tuning = {name: environment[name] for name in TUNING_SETTINGS if name in environment}
    if not tuning:
        return environment
    return {**environment, TUNING_VARIABLE: json.dumps(tuning)}


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child ``manage.py``: the test database, a fixed key,
    the test settings."""
    from django.conf import settings

    from tests.conftest import TEST_SETTINGS

    env = dict(os.environ)
    env.update({name: str(value) for name, value in TEST_SETTINGS.items()})
    env.update(
        {
            "DATABASE_URL": test_database_url(),
            "SECRET_KEY": settings.SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": "nudgeproject.settings",
        }
    )
    env.update(extra)
    return with_tuning(env)


def manage(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``python manage.py ARGS`` in its own process; the caller waits."""
    return subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "manage.py"), *args],
        cwd=PROJECT_ROOT,
        env=env or subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
