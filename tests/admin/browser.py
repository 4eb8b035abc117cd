"""Headless Debian Chromium against pytest-django's live server, shared by the browser tests.

Playwright never downloads a browser here; a test is skipped only where no
Chromium binary is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_binary() -> Path | None:
    if CHROMIUM.is_file():
        return CHROMIUM
    found = shutil.which("chromium")
    return Path(found) if found else None


def _reload_middleware(live_server) -> None:
    """Rebuild the server's middleware: SecurityMiddleware reads its settings once."""
    handler = live_server.thread.httpd.get_app()
    while handler is not None:
        handler.load_middleware()
        handler = getattr(handler, "application", None)


@pytest.fixture
def _plain_http():
    """Replaces the package's autouse override: ``http_live_server`` owns it here."""


@pytest.fixture
def _rebuild_middleware_after(live_server):
    """Set up before ``settings``, so torn down after it: rebuilds with the originals."""
    yield
    _reload_middleware(live_server)


@pytest.fixture
def http_live_server(_rebuild_middleware_after, live_server, settings):
    """pytest-django's live server, serving plain http for the length of one test.

    The live server is session-wide and its middleware was built with the
    production defaults (SecurityMiddleware reads them once), so it is rebuilt
    after the ``settings`` overrides, and again once they are undone.
    """
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    settings.SECURE_HSTS_SECONDS = 0
    _reload_middleware(live_server)
    return live_server


def login(page, live_server_url: str, username: str, password: str) -> None:
    page.goto(f"{live_server_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server_url}/admin/")
