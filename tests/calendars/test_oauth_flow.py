"""The OAuth authorisation-code flow through the Django test client and the fake token endpoints."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import signing

from calendars.models import CalendarConnection
from calendars.views import STATE_SALT
from providers import crypto
from tenancy.scope import tenant_scope
from tests.calendars.conftest import run_sync
from tests.fakes import google_server, microsoft_server


def start_consent(client, provider: str) -> dict[str, str]:
    response = client.get(f"/calendars/{provider}/connect/", secure=True)
    assert response.status_code == 302
    return {k: v[-1] for k, v in parse_qs(urlsplit(response["Location"]).query).items()}


def connections_of(user) -> list[CalendarConnection]:
    with tenant_scope(user.pk):
        return list(CalendarConnection.objects.filter(user=user))


def test_google_consent_callback_and_first_sync(client, make_user, fake_google):
    user = make_user()
    client.force_login(user)

    response = client.get("/calendars/google/connect/", secure=True)
    assert response["Location"].startswith(fake_google.auth_url + "?")
    params = start_consent(client, "google")
    assert params["access_type"] == "offline" and params["prompt"] == "consent"
    assert params["response_type"] == "code" and "calendar.readonly" in params["scope"]
    assert params["redirect_uri"] == "https://testserver/calendars/google/callback/"

    code = fake_google.issue_code()
    response = client.get(
        "/calendars/google/callback/", {"code": code, "state": params["state"]}, secure=True
    )

    assert response.status_code == 200, response.content
    [connection] = connections_of(user)
    assert (connection.provider, connection.account) == ("google", google_server.ACCOUNT)
    assert connection.resync_requested and connection.status == "active"
    [token_call] = fake_google.token_calls()
    assert token_call.params["grant_type"] == "authorization_code"
    assert token_call.params["redirect_uri"] == params["redirect_uri"]
    refresh = crypto.decrypt(connection.refresh_token_encrypted)
    assert refresh.startswith("1//refresh-") and refresh not in connection.refresh_token_encrypted
    assert refresh.encode() not in response.content
    assert run_sync(user.pk).synced == 1


def test_microsoft_consent_asks_for_offline_access(client, make_user, fake_graph):
    user = make_user()
    client.force_login(user)
    params = start_consent(client, "microsoft")
    assert "offline_access" in params["scope"].split()

    response = client.get(
        "/calendars/microsoft/callback/",
        {"code": fake_graph.issue_code(), "state": params["state"]},
        secure=True,
    )

    assert response.status_code == 200, response.content
    [connection] = connections_of(user)
    assert connection.account == microsoft_server.ACCOUNT
    assert run_sync(user.pk).synced == 1


def test_a_state_is_good_once_for_the_user_who_started_it(client, make_user, fake_google):
    alice, mallory = make_user(), make_user()
    client.force_login(mallory)
    mallorys_state = start_consent(client, "google")["state"]

    client.force_login(alice)
    start_consent(client, "google")
    response = client.get(
        "/calendars/google/callback/",
        {"code": fake_google.issue_code(), "state": mallorys_state},
        secure=True,
    )
    assert response.status_code == 400
    assert connections_of(alice) == [] and connections_of(mallory) == []

    state = start_consent(client, "google")["state"]
    ok = client.get(
        "/calendars/google/callback/",
        {"code": fake_google.issue_code(), "state": state},
        secure=True,
    )
    replay = client.get(
        "/calendars/google/callback/",
        {"code": fake_google.issue_code(), "state": state},
        secure=True,
    )
    assert (ok.status_code, replay.status_code) == (200, 400)


@pytest.mark.parametrize("mangle", ["tampered", "wrong-provider", "denied"])
def test_bad_callbacks_are_refused(client, make_user, fake_google, mangle):
    user = make_user()
    client.force_login(user)
    state = start_consent(client, "google")["state"]
    query = {"code": fake_google.issue_code(), "state": state}
    if mangle == "tampered":
        query["state"] = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
    elif mangle == "wrong-provider":
        payload = signing.loads(state, salt=STATE_SALT)
        query["state"] = signing.dumps({**payload, "p": "microsoft"}, salt=STATE_SALT)
    else:
        query = {"error": "access_denied", "state": state}

    response = client.get("/calendars/google/callback/", query, secure=True)

    assert response.status_code == 400
    assert connections_of(user) == []
    assert fake_google.token_calls() == []


def test_a_refused_code_is_reported_without_storing_anything(client, make_user, fake_google):
    user = make_user()
    client.force_login(user)
    state = start_consent(client, "google")["state"]

    response = client.get(
        "/calendars/google/callback/", {"code": "4/not-issued", "state": state}, secure=True
    )

    assert response.status_code == 502 and b"invalid_grant" in response.content
    assert connections_of(user) == []


def test_connect_needs_a_login(client, fake_google):
    response = client.get("/calendars/google/connect/", secure=True)
    assert response.status_code == 302 and "login" in response["Location"]


def test_reconnecting_repairs_a_needs_reauth_connection(client, make_user, fake_google):
    user = make_user()
    client.force_login(user)
    state = start_consent(client, "google")["state"]
    client.get(
        "/calendars/google/callback/",
        {"code": fake_google.issue_code(), "state": state},
        secure=True,
    )
    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(user=user).update(status="needs_reauth")

    state = start_consent(client, "google")["state"]
    client.get(
        "/calendars/google/callback/",
        {"code": fake_google.issue_code(), "state": state},
        secure=True,
    )

    [connection] = connections_of(user)
    assert connection.status == "active"


def test_the_end_of_a_connect_is_in_the_persons_language(client, make_user, fake_google):
    user = make_user(language="de")
    client.force_login(user)
    params = start_consent(client, "google")

    done = client.get(
        "/calendars/google/callback/",
        {"code": fake_google.issue_code(), "state": params["state"]},
        secure=True,
    )
    refused = client.get("/calendars/google/callback/", {"state": "forged"}, secure=True)

    assert done.status_code == 200 and done["Content-Language"] == "de"
    text = done.content.decode()
    assert f"Google Calendar verbunden ({google_server.ACCOUNT})" in text
    assert "Zurück zu den Kalendern" in text and "connected" not in text
    assert refused.status_code == 400
    assert "Dieser Anmeldelink ist ungültig oder abgelaufen" in refused.content.decode()
