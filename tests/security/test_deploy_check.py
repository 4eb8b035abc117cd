"""``manage.py check --deploy`` passes with production settings, and fails without them.

Settings are read at import, so each check runs in a fresh process with its own
environment, pointed at the test database (the row-level-security check runs too).
"""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest

from tests.support.processes import PROJECT_ROOT, subprocess_env

pytestmark = pytest.mark.django_db

CHECK = (
    "import django; django.setup()\n"
    "from django.core.management import call_command\n"
    "call_command('check', deploy=True, fail_level='WARNING')\n"
)


def production_env(**overrides: str) -> dict[str, str]:
    env = subprocess_env(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="nudge.example.com",
        CSRF_TRUSTED_ORIGINS="https://nudge.example.com",
        CRON_SECRET=secrets.token_urlsafe(32),
        # Preloading HSTS is a one-way door for every subdomain, so it is off by
        # default and --deploy warns (W021) until the operator opts in.
        SECURE_HSTS_PRELOAD="true",
    )
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
        env.pop(name, None)
    env.pop("SECURE_HSTS_SECONDS", None)
    env.update(overrides)
    return env


def run_check(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHECK],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_passes_with_production_settings():
    result = run_check(production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in (result.stdout + result.stderr).lower()


def test_without_hsts_preload_the_only_warning_is_w021():
    result = run_check(production_env(SECURE_HSTS_PRELOAD="false"))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "security.W021" in output and "identified 1 issue" in output


@pytest.mark.parametrize(
    ("overrides", "check_id"),
    [
        ({"DEBUG": "true"}, "security.W018"),
        ({"SECRET_KEY": "short"}, "security.W009"),
        ({"SECURE_SSL_REDIRECT": "false"}, "security.W008"),
        ({"SECURE_HSTS_SECONDS": "0"}, "security.W004"),
        ({"SESSION_COOKIE_SECURE": "false"}, "security.W012"),
    ],
)
def test_check_deploy_fails_when_a_protection_is_turned_off(overrides, check_id):
    """Not vacuous: the same command notices each protection missing."""
    result = run_check(production_env(**overrides))
    assert result.returncode != 0
    assert check_id in result.stderr + result.stdout
