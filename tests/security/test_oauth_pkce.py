"""PKCE (S256) on both OAuth flows: the consent page gets a challenge, the code exchange
sends the verifier, and the fake token endpoints refuse a code without the matching one."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from calendars.models import CalendarConnection
from tenancy.scope import tenant_scope
from tests.calendars.conftest import (  # noqa: F401 — fixtures
    calendar_settings,
    fake_google,
    fake_graph,
)

pytestmark = pytest.mark.django_db

FLOWS = [("google", "fake_google"), ("microsoft", "fake_graph")]


def consent(client: Client, provider: str) -> dict[str, str]:
    response = client.get(f"/calendars/{provider}/connect/", secure=True)
    assert response.status_code == 302
    return {k: v[-1] for k, v in parse_qs(urlsplit(response["Location"]).query).items()}


def connections_of(user) -> list[CalendarConnection]:
    with tenant_scope(user.pk):
        return list(CalendarConnection.objects.filter(user=user))


@pytest.mark.parametrize(("provider", "fake_name"), FLOWS)
def test_the_code_exchange_carries_the_verifier_of_the_consent_challenge(
    request, make_user, provider, fake_name
):
    """issue 23 item 8: PKCE S256 on the Google and Microsoft flows."""
    fake = request.getfixturevalue(fake_name)
    user = make_user()
    client = Client()
    client.force_login(user)
    params = consent(client, provider)
    assert params["code_challenge_method"] == "S256"
    assert len(params["code_challenge"]) == 43  # a SHA-256, base64url, unpadded
    code = fake.issue_code(params["code_challenge"])
    response = client.get(
        f"/calendars/{provider}/callback/", {"code": code, "state": params["state"]}, secure=True
    )
    assert response.status_code == 200, response.content
    [exchange] = [c for c in fake.token_calls() if c.params["grant_type"] == "authorization_code"]
    verifier = exchange.params["code_verifier"]
    assert 43 <= len(verifier) <= 128
    digest = hashlib.sha256(verifier.encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == params["code_challenge"]
    assert len(connections_of(user)) == 1


@pytest.mark.parametrize(("provider", "fake_name"), FLOWS)
def test_a_code_issued_for_another_challenge_is_refused(request, make_user, provider, fake_name):
    """issue 23 item 8: a code consented for someone else's challenge (an intercepted or
    injected code) cannot be redeemed in this user's session."""
    fake = request.getfixturevalue(fake_name)
    mallory = Client()
    mallory.force_login(make_user())
    their_challenge = consent(mallory, provider)["code_challenge"]
    victim = make_user()
    client = Client()
    client.force_login(victim)
    params = consent(client, provider)
    stolen = fake.issue_code(their_challenge)
    response = client.get(
        f"/calendars/{provider}/callback/",
        {"code": stolen, "state": params["state"]},
        secure=True,
    )
    assert response.status_code == 502
    assert connections_of(victim) == []
