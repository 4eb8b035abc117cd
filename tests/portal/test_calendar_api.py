"""The calendars API over real HTTP: connecting a CalDAV account in the page's steps
(record, choose what discovery found, a new password), the password never returned."""

from __future__ import annotations

import pytest
import requests
from cryptography.fernet import Fernet
from django.utils import timezone

from calendars.models import CalendarConnection, ConnectionStatus, Provider
from providers import crypto
from tenancy.scope import tenant_scope

from . import test_api
from .test_api import _plain_http  # noqa: F401 — fixture
from .test_caldav_pages import APP_PASSWORD, discovered_account, icloud_resolves  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
api = test_api.api  # the fixture: a token's session on the live server


@pytest.fixture(autouse=True)
def token_key(settings):
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]


@pytest.mark.usefixtures("icloud_resolves")
def test_connect_icloud_then_list_it(api):
    _user, session, base = api

    created = session.post(
        f"{base}/calendars/caldav",
        json={"preset": "icloud", "username": "ana@icloud.com", "password": APP_PASSWORD},
    )

    assert created.status_code == 202, created.text
    assert created.json()["state"] == "checking" and created.json()["provider"] == "caldav"
    assert APP_PASSWORD not in created.text
    listed = session.get(f"{base}/calendars").json()["calendars"]
    assert [(c["provider"], c["account"], c["state"]) for c in listed] == [
        ("caldav", "ana@icloud.com", "checking")
    ]
    # Once synced, the instant is written as every instant of the API is: in UTC.
    with tenant_scope(_user.pk):
        CalendarConnection.objects.filter(user_id=_user.pk).update(last_synced_at=timezone.now())
    [synced] = session.get(f"{base}/calendars").json()["calendars"]
    assert synced["last_synced_at"].endswith("Z")


def test_a_private_server_and_a_missing_password_are_400s(api):
    _user, session, base = api
    private = {"preset": "other", "server_url": "http://10.0.0.5/", "username": "a"}

    refused = session.post(f"{base}/calendars/caldav", json={**private, "password": "x"})
    missing = session.post(f"{base}/calendars/caldav", json=private)

    assert refused.status_code == 400 and "cannot be used" in refused.json()["error"]
    assert missing.status_code == 400 and "password" in missing.json()["error"]


def test_choose_the_discovered_calendars_then_renew_a_refused_password(api):
    user, session, base = api
    account = discovered_account(user)
    [listed] = session.get(f"{base}/calendars").json()["calendars"]
    assert listed["state"] == "choose_calendars" and len(listed["choices"]) == 2

    chosen = session.post(
        f"{base}/calendars/{account.pk}/caldav/choose",
        json={"calendars": [c["url"] for c in listed["choices"]]},
    )

    assert chosen.status_code == 200, chosen.text
    assert sorted(c["name"] for c in chosen.json()["calendars"]) == ["Home", "Work"]
    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(user_id=user.pk).update(
            status=ConnectionStatus.NEEDS_REAUTH
        )
    assert {c["state"] for c in session.get(f"{base}/calendars").json()["calendars"]} == {
        "needs_password"
    }
    renewed = session.post(
        f"{base}/calendars/{account.pk}/caldav/password", json={"password": "fresh-one"}
    )
    assert renewed.status_code == 200 and renewed.json()["state"] == "checking"
    with tenant_scope(user.pk):
        rows = CalendarConnection.objects.filter(user_id=user.pk, provider=Provider.CALDAV)
        assert {crypto.decrypt(r.access_token_encrypted) for r in rows} == {"fresh-one"}
    assert "fresh-one" not in renewed.text


def test_another_persons_calendar_is_a_404(api, person):
    _user, session, base = api
    other = discovered_account(person("bob"))

    response = session.post(f"{base}/calendars/{other.pk}/caldav/choose", json={"calendars": []})

    assert response.status_code == 404
    assert requests.get(f"{base}/calendars", timeout=5).status_code == 401
