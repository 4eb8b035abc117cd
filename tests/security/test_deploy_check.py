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
        PUBLIC_BASE_URL="https://nudge.example.com",
        CRON_SECRET=secrets.token_urlsafe(32),
    )
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


def test_check_deploy_passes_with_production_settings_but_for_hsts_preload():
    """HSTS preload is a one-way door for every subdomain, so it stays off and --deploy
    says so (W021); nothing else is found."""
    result = run_check(production_env())
    output = result.stdout + result.stderr
    assert "security.W021" in output and "identified 1 issue" in output, output


def test_the_https_protections_cannot_be_turned_off_from_the_environment():
    """Redirects, secure cookies and HSTS follow DEBUG alone: an old variable changes nothing."""
    result = run_check(
        production_env(
            SECURE_SSL_REDIRECT="false",
            SESSION_COOKIE_SECURE="false",
            CSRF_COOKIE_SECURE="false",
            SECURE_HSTS_SECONDS="0",
        )
    )
    output = result.stdout + result.stderr
    assert "identified 1 issue" in output and "security.W021" in output, output


@pytest.mark.parametrize(
    ("overrides", "check_id"),
    [
        ({"DEBUG": "true"}, "security.W018"),
        ({"SECRET_KEY": "short"}, "security.W009"),
    ],
)
def test_check_deploy_fails_when_a_protection_is_turned_off(overrides, check_id):
    """Not vacuous: the same command notices each protection missing."""
    result = run_check(production_env(**overrides))
    assert result.returncode != 0
    assert check_id in result.stderr + result.stdout
