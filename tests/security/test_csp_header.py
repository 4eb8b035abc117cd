"""The Content-Security-Policy header on the portal and the admin, and the nonce on
every inline block (the browser test proves the same with Chromium's enforcement)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple 42"


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False


def policy(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.strip() for part in header.split(";") if part.strip()}


def inline_blocks_carry_the_nonce(response) -> None:
    directives = policy(response)
    html = response.content.decode()
    nonce = re.search(r"'nonce-([^']+)'", directives["script-src"])[1]
    assert f"'nonce-{nonce}'" in directives["style-src"]
    for tag in re.findall(r"<(?:script|style)\b[^>]*>", html):
        assert "src=" in tag or f'nonce="{nonce}"' in tag, tag
    assert not re.search(r"<[^>]+\sstyle=", html), "inline style attribute"
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]


@pytest.mark.parametrize("path", ["/", "/settings/", "/follow-ups/", "/calendars/"])
def test_portal_pages_send_a_strict_policy(path):
    """issue 23 item 8: CSP on the portal; inline blocks use the response's nonce."""
    user = get_user_model().objects.create_user("csp", "csp@example.com", PASSWORD)
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    directives = policy(response)
    assert directives["default-src"] == "default-src 'self'"
    assert directives["frame-ancestors"] == "frame-ancestors 'none'"
    assert directives["object-src"] == "object-src 'none'"
    inline_blocks_carry_the_nonce(response)


@pytest.mark.parametrize("path", ["/admin/login/", "/admin/", "/admin/portal/apitoken/"])
def test_admin_pages_send_the_same_policy(path):
    """issue 23 item 8: CSP on the admin, including its own inline bits."""
    staff = get_user_model().objects.create_user(
        "cspstaff", "s@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    client = Client()
    if path != "/admin/login/":
        client.force_login(staff)
    response = client.get(path)
    assert response.status_code == 200
    inline_blocks_carry_the_nonce(response)
