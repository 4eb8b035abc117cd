"""The follow-ups API over real HTTP (the live server, ``requests``): tokens,
validation with clear 400s and nothing written, and the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import requests
from django.utils import timezone

from accounts.actions import ensure_settings
from accounts.models import DeliverySettings
from followups.actions import TITLE_MAX_CHARS
from followups.models import FollowUp
from portal.tokens import new_api_token
from tenancy.scope import tenant_scope

from .conftest import pending

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def _plain_http():
    """Replaces the autouse override: ``http_live_server`` owns it here."""


@pytest.fixture
def api(http_live_server, person):
    """(user, requests.Session with the user's token, base URL)."""
    user = person("ana")
    with tenant_scope(user.pk):
        _, token = new_api_token(user.pk, "host")
        ensure_settings(user.pk)  # on the development console: a channel to plan for
        DeliverySettings.objects.filter(user_id=user.pk).update(channel="console")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    yield user, session, f"{http_live_server.url}/api"
    session.close()


def follow_ups_of(user) -> list[FollowUp]:
    with tenant_scope(user.pk):
        return list(FollowUp.objects.filter(user_id=user.pk))


def soon(minutes: int = 30) -> str:
    return (timezone.now() + timedelta(minutes=minutes)).isoformat()


def test_create_read_change_and_delete(api):
    user, session, base = api
    created = session.post(f"{base}/follow-ups", json={"title": "Ship it", "due_at": soon(12)})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["title"] == "Ship it" and body["done"] is False
    assert len(pending(user)) == 1  # queued at once, no sweep
    item = f"{base}/follow-ups/{body['id']}"
    assert session.get(item).json() == body
    assert [f["id"] for f in session.get(f"{base}/follow-ups").json()["follow_ups"]] == [body["id"]]
    changed = session.patch(item, json={"done": True})
    assert changed.status_code == 200 and changed.json()["done"] is True
    assert pending(user) == []
    assert session.get(f"{base}/follow-ups", params={"done": "false"}).json() == {"follow_ups": []}
    assert session.delete(item).status_code == 204
    assert session.get(item).status_code == 404
    assert follow_ups_of(user) == []


def test_an_instant_reads_the_same_in_utc_whatever_offset_it_was_sent_with(api):
    _, session, base = api
    due = (timezone.now() + timedelta(hours=3)).astimezone(ZoneInfo("Asia/Kolkata"))
    created = session.post(f"{base}/follow-ups", json={"title": "Call", "due_at": due.isoformat()})
    body = created.json()
    assert body["due_at"].endswith("Z") and body["next_due_at"] == body["due_at"]
    assert datetime.fromisoformat(body["due_at"]) == due
    assert session.get(f"{base}/follow-ups/{body['id']}").json() == body


@pytest.mark.parametrize(
    "payload,message",
    [
        ({"title": "x", "due_at": soon(), "priority": 1}, "unknown field(s): priority"),
        ({"title": 42, "due_at": soon()}, "title must be a string"),
        ({"title": "x", "due_at": 1767225600}, "due_at must be a string"),
        ({"title": "x", "due_at": "2030-01-01T10:00:00"}, "due_at needs a UTC offset"),
        ({"title": "x", "due_at": "next tuesday"}, "due_at must be an ISO 8601 date-time"),
        ({"title": "x", "due_at": "2020-01-01T10:00:00Z"}, "due_at is in the past"),
        ({"title": "x" * (TITLE_MAX_CHARS + 1), "due_at": soon()}, "the limit is 200"),
        ({"title": "   ", "due_at": soon()}, "title must not be empty"),
        ({"title": "x"}, "missing field(s): due_at"),
        (["title", "x"], "the body must be a JSON object"),
    ],
)
def test_bad_input_is_a_400_with_a_clear_message_and_nothing_written(api, payload, message):
    user, session, base = api
    response = session.post(f"{base}/follow-ups", json=payload)
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert follow_ups_of(user) == []
    assert pending(user) == []


def test_bad_patches_change_nothing(api):
    _user, session, base = api
    body = session.post(f"{base}/follow-ups", json={"title": "Keep", "due_at": soon()}).json()
    item = f"{base}/follow-ups/{body['id']}"
    for payload, message in [
        ({}, "send at least one of"),
        ({"done": "yes"}, "done must be true or false"),
        ({"title": "New", "owner": 2}, "unknown field(s): owner"),
        ({"due_at": "2031-05-01 09:00"}, "due_at needs a UTC offset"),
        ({"title": "New", "due_at": "2001-05-01T09:00:00+02:00"}, "due_at is in the past"),
    ]:
        response = session.patch(item, json=payload)
        assert response.status_code == 400 and message in response.json()["error"], payload
    assert session.get(item).json() == body


def test_not_json_is_refused(api):
    user, session, base = api
    response = session.post(
        f"{base}/follow-ups", data="title=x", headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 400 and "Content-Type: application/json" in response.text
    response = session.post(
        f"{base}/follow-ups", data="{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400 and "not valid JSON" in response.text
    assert follow_ups_of(user) == []


@pytest.mark.parametrize(
    "header",
    [None, "Bearer ", "Bearer nudge_1_short", "Basic dXNlcjpwYXNz", "Bearer nudge_x_" + "a" * 40],
)
def test_requests_without_a_live_token_are_401(api, header):
    _, _session, base = api
    headers = {"Authorization": header} if header else {}
    response = requests.get(f"{base}/follow-ups", headers=headers, timeout=5)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_revoked_token_stops_working(api):
    user, session, base = api
    assert session.get(f"{base}/follow-ups").status_code == 200
    with tenant_scope(user.pk):
        from portal.models import ApiToken

        ApiToken.objects.filter(user_id=user.pk).update(revoked_at=timezone.now())
    assert session.get(f"{base}/follow-ups").status_code == 401


def test_a_session_cookie_is_not_enough(api, http_live_server, person):
    """The API takes tokens only, so a browser session cannot be ridden (CSRF)."""
    _user, _, base = api
    browser = requests.Session()
    page = browser.get(f"{http_live_server.url}/accounts/login/")
    browser.post(
        f"{http_live_server.url}/accounts/login/",
        data={
            "username": "ana",
            "password": "correct horse battery staple 42",
            "csrfmiddlewaretoken": page.cookies["csrftoken"],
        },
    )
    assert "sessionid" in browser.cookies
    assert (
        browser.post(f"{base}/follow-ups", json={"title": "x", "due_at": soon()}).status_code == 401
    )


def test_wrong_method_is_405(api):
    _, session, base = api
    response = session.put(f"{base}/follow-ups", json={})
    assert response.status_code == 405 and response.headers["Allow"] == "GET, POST"


def test_the_schema_describes_every_route_and_answer(api, http_live_server):
    schema = requests.get(f"{http_live_server.url}/api/schema", timeout=5).json()
    assert schema["openapi"].startswith("3.1")
    paths = schema["paths"]
    assert set(paths) == {
        "/api/follow-ups",
        "/api/follow-ups/{id}",
        "/api/calendars",
        "/api/calendars/caldav",
        "/api/calendars/{id}/caldav/choose",
        "/api/calendars/{id}/caldav/password",
    }
    assert set(paths["/api/follow-ups"]) == {"get", "post"}
    assert {"get", "patch", "delete"} <= set(paths["/api/follow-ups/{id}"])
    create = schema["components"]["schemas"]["FollowUpCreate"]
    assert create["additionalProperties"] is False
    assert create["properties"]["title"]["maxLength"] == TITLE_MAX_CHARS
    assert "400" in paths["/api/follow-ups"]["post"]["responses"]
