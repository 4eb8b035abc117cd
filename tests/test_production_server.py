"""The production web server as the README runs it: collectstatic, then the real
gunicorn with DEBUG off behind a TLS proxy, answering over HTTP — a page, a static
file through WhiteNoise, a Telegram webhook update and a Google push notification.

Also: ``.env.example`` names every setting the settings module reads.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.utils import timezone

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, PushState
from calendars.push import worklist
from core.bearer import digest
from core.config import KNOBS, NudgeConfig
from messaging.addresses import new_telegram_code
from tenancy.scope import tenant_scope
from tests.calendars.conftest import make_connection
from tests.fakes.telegram_server import FakeTelegram
from tests.support.processes import PROJECT_ROOT, manage, subprocess_env

WEBHOOK_SECRET = "s3cret_Webhook-token_0123456789"
PUSH_SECRET = secrets.token_urlsafe(32)
CHAT = 5550077
# What the TLS proxy in front of gunicorn adds to every request it forwards.
VIA_PROXY = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}


def production_env(static_root: Path) -> dict[str, str]:
    """The test database's settings, as a deployment behind a TLS proxy sets them."""
    return subprocess_env(
        DEBUG="false",
        STATIC_ROOT=str(static_root),
        ALLOWED_HOSTS="127.0.0.1",
        BEHIND_TLS_PROXY="true",
        TELEGRAM_WEBHOOK_SECRET=WEBHOOK_SECRET,
        TELEGRAM_BOT_USERNAME="nudge_test_bot",
    )


def _drain(stream, lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


@pytest.fixture
def gunicorn(tmp_path) -> Iterator[tuple[str, Path]]:
    """collectstatic into a temporary folder, then gunicorn on a free port; its base URL."""
    static_root = tmp_path / "static"
    env = production_env(static_root)
    collect = manage("collectstatic", "--noinput", env=env)
    _out, err = collect.communicate(timeout=120)
    assert collect.returncode == 0, err
    assert (static_root / "admin" / "css" / "base.css").is_file()

    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "nudgeproject.wsgi",
            "--bind",
            "127.0.0.1:0",  # the kernel picks a free port; gunicorn says which
            "--workers",
            "2",
            "--threads",
            "2",
            "--timeout",
            "30",
            "--no-control-socket",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log: list[str] = []
    reader = threading.Thread(target=_drain, args=(server.stderr, log), daemon=True)
    reader.start()
    try:
        base_url = _wait_until_serving(server, log)
        yield base_url, static_root
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        reader.join(timeout=5)


def _wait_until_serving(server: subprocess.Popen, log: list[str]) -> str:
    deadline = time.monotonic() + 90
    base_url = None
    while time.monotonic() < deadline:
        assert server.poll() is None, "gunicorn exited:\n" + "".join(log)
        if base_url is None:
            found = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", "".join(log))
            base_url = found[1] if found else None
        if base_url is not None:
            try:
                requests.get(f"{base_url}/healthz", headers=VIA_PROXY, timeout=5)
                return base_url
            except requests.ConnectionError:
                pass
        time.sleep(0.2)
    raise AssertionError("gunicorn did not start serving:\n" + "".join(log))


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_pages_static_files_and_webhooks(gunicorn, make_user):
    base_url, static_root = gunicorn

    # A page, over "https" as the proxy says, with the production headers.
    page = requests.get(f"{base_url}/accounts/login/", headers=VIA_PROXY, timeout=30)
    assert page.status_code == 200
    assert 'name="password"' in page.text
    assert page.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert "script-src" in page.headers["Content-Security-Policy"]
    # Without the proxy's word it is plain http, sent on to https.
    plain = requests.get(f"{base_url}/accounts/login/", allow_redirects=False, timeout=30)
    assert plain.status_code == 301
    assert plain.headers["Location"].startswith("https://")

    # A static file the admin's sign-in page links, from STATIC_ROOT through WhiteNoise.
    admin_page = requests.get(f"{base_url}/admin/login/", headers=VIA_PROXY, timeout=30).text
    stylesheet = re.search(r'href="(/static/admin/css/[^"]+\.css)"', admin_page)
    assert stylesheet is not None, admin_page
    css = requests.get(base_url + stylesheet[1], headers=VIA_PROXY, timeout=30)
    assert css.status_code == 200
    assert css.headers["Content-Type"].startswith("text/css")
    assert css.content == (static_root / stylesheet[1].removeprefix("/static/")).read_bytes()

    # A Telegram update with the webhook's secret header links the chat.
    user = make_user("ana")
    with tenant_scope(user.pk):
        code = new_telegram_code(user.pk, timezone.now(), NudgeConfig.from_settings())
    update = FakeTelegram().push_message(CHAT, f"/start {code}")
    refused = requests.post(
        f"{base_url}/telegram/webhook",
        json=update,
        headers={**VIA_PROXY, "X-Telegram-Bot-Api-Secret-Token": "wrong"},
        timeout=30,
    )
    assert refused.status_code == 403
    answered = requests.post(
        f"{base_url}/telegram/webhook",
        data=json.dumps(update),
        headers={
            **VIA_PROXY,
            "Content-Type": "application/json",
            "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET,
        },
        timeout=30,
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["method"] == "sendMessage"
    with tenant_scope(user.pk):
        linked = DeliverySettings.objects.get(user_id=user.pk)
    assert (linked.channel, linked.telegram_chat_id) == ("telegram", str(CHAT))

    # A Google push notification for a live channel marks its calendar changed.
    connection = _google_channel(make_user("bea"))
    notified = requests.post(
        f"{base_url}/calendars/push/google/",
        headers={
            **VIA_PROXY,
            "X-Goog-Channel-ID": connection.push_channel_id,
            "X-Goog-Channel-Token": PUSH_SECRET,
            "X-Goog-Resource-ID": connection.push_resource_id,
            "X-Goog-Resource-State": "exists",
            "X-Goog-Message-Number": "11",
        },
        timeout=30,
    )
    assert notified.status_code == 200
    with tenant_scope(connection.user_id):
        marked = CalendarConnection.objects.get(pk=connection.pk)
    assert marked.resync_requested
    assert marked.push_message_number == 11
    assert connection.pk in [item.connection_id for item in worklist.take_changed()]


def _google_channel(user) -> CalendarConnection:
    """A Google connection with a live push channel, as channel creation leaves it."""
    row = make_connection(user, "google", account="someone@example.com")
    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(pk=row.pk).update(
            push_state=PushState.LIVE,
            push_channel_id=f"nudge-{user.pk}-{row.pk}-abcdefabcdefabcd",
            push_resource_id="res-1",
            push_secret_digest=digest(PUSH_SECRET),
            push_expires_at=timezone.now() + timedelta(days=2),
            push_message_number=10,
        )
        row = CalendarConnection.objects.get(pk=row.pk)
    worklist.enroll(row.pk, user.pk, timezone.now())
    return row


def test_env_example_names_every_setting_read():
    """Every environment variable the settings module and core/config.py read is in
    ``.env.example``, with a comment line above it."""
    settings_source = (PROJECT_ROOT / "nudgeproject" / "settings.py").read_text()
    read = set(re.findall(r'\benv\.\w+\(\s*"([A-Z][A-Z0-9_]*)"', settings_source))
    read |= {knob.setting for knob in KNOBS if knob.public}
    example = (PROJECT_ROOT / ".env.example").read_text().splitlines()
    assignment = re.compile(r"^#?([A-Z][A-Z0-9_]*)=")
    named: dict[str, int] = {}
    for number, line in enumerate(example):
        found = assignment.match(line)
        if found:
            named[found[1]] = number
    assert read - set(named) == set(), "missing from .env.example"
    assert set(named) - read == set(), "in .env.example but never read"
    for name, number in named.items():
        above = example[number - 1] if number else ""
        assert above.startswith("# ") and not assignment.match(above), f"{name}: no comment"
