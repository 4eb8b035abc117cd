"""Issue 34, item 8: the page a refused form gets (CSRF failure) is a page of the site.

Django's own failure page has an inline ``<style>`` without the response's nonce,
which the Content-Security-Policy blocks (and reports), and speaks to developers.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.security.test_csp_header import inline_blocks_carry_the_nonce, policy

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple 42"


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False


def refused_form(path: str, *, signed_in: bool = False, staff: bool = False):
    client = Client(enforce_csrf_checks=True)
    if signed_in:
        user = get_user_model().objects.create_user(
            "formfiller", "f@example.com", PASSWORD, is_staff=staff, is_superuser=staff
        )
        client.force_login(user)
    return client.post(path, {"username": "someone", "password": "not-checked"})


@pytest.mark.parametrize(
    ("path", "signed_in", "staff"),
    [
        ("/accounts/login/", False, False),
        ("/admin/login/", False, False),
        ("/settings/", True, False),
        ("/admin/scheduled_sends/scheduledsend/", True, True),
    ],
)
def test_the_csrf_failure_page_has_no_style_without_the_nonce(path, signed_in, staff):
    """issue 34 item 8 (CSRF failure page's inline style): a form posted without its
    token is a 403 whose every <style> carries the response's CSP nonce."""
    response = refused_form(path, signed_in=signed_in, staff=staff)
    assert response.status_code == 403
    html = response.content.decode()
    styles = re.findall(r"<style\b[^>]*>", html)
    nonce = re.search(r"'nonce-([^']+)'", policy(response)["style-src"])[1]
    assert styles and all(f'nonce="{nonce}"' in tag for tag in styles), styles
    inline_blocks_carry_the_nonce(response)


def test_the_csrf_failure_page_speaks_to_the_person():
    """issue 34 item 8: the site's plain words, not Django's developer page."""
    response = refused_form("/accounts/login/")
    html = response.content.decode()
    assert "This form could not be sent" in html
    assert "reload the page and try again" in html
    for developer_words in ("CSRF", "Referer", "DEBUG", "csrf_token", "Forbidden"):
        assert developer_words not in html
