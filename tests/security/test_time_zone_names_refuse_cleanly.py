"""Issue 34, item 4: a time zone name from a request is looked up without a 500.

``zoneinfo`` answers a directory of the tz database ("Europe") with
IsADirectoryError and a 300-character name with "File name too long" — both
OSError, which the zone helper did not catch.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from core.zones import UTC_ZONE, known_zone, zone_of
from followups.models import FollowUp
from portal.forms import SettingsForm
from portal.tokens import new_api_token
from tenancy.scope import tenant_scope

pytestmark = pytest.mark.django_db

HOSTILE_NAMES = [
    "Europe",  # a directory: IsADirectoryError
    "a" * 300,  # longer than a file name: OSError
    "Europe/" + "B" * 300,
    "Europe/",  # not a normalised path: ValueError
    "../../etc/passwd",
    "/etc/localtime",
    "Europe/Berlin\x00",
    "zoneinfo",
    ".",
    "UTC ",
]


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False


@pytest.fixture
def api(make_user):
    user = make_user()
    with tenant_scope(user.pk):
        _, token = new_api_token(user.pk, "host")
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {token}")
    return user, client


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_api_refuses_a_zone_that_is_not_one_with_a_400(api, name):
    """issue 34 item 4 (time-zone 500 in the API): "Europe" or a 300-character name as
    ``time_zone`` was a 500 on create and on change; now a 400 naming the field."""
    user, client = api
    due = (timezone.now() + timedelta(days=1)).isoformat()
    body = {"title": "Call back", "due_at": due, "time_zone": name}
    response = client.post("/api/follow-ups", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {"error": "time_zone must be an IANA zone (e.g. Europe/Berlin)"}

    created = client.post(
        "/api/follow-ups", {"title": "Call back", "due_at": due}, content_type="application/json"
    )
    assert created.status_code == 201
    follow_up = created.json()["id"]
    response = client.patch(
        f"/api/follow-ups/{follow_up}", {"time_zone": name}, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    with tenant_scope(user.pk):
        assert FollowUp.objects.get(pk=follow_up).repeat_zone != name


def test_a_real_zone_still_goes_through(api):
    """issue 34 item 4: the refusal is only for names that are not zones."""
    _, client = api
    due = (timezone.now() + timedelta(days=1)).isoformat()
    body = {"title": "Call back", "due_at": due, "time_zone": "America/Argentina/Buenos_Aires"}
    response = client.post("/api/follow-ups", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["time_zone"] == "America/Argentina/Buenos_Aires"


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_zone_helper_never_raises(name):
    """issue 34 item 4: every reader (pages, quiet hours, repeats) falls back to UTC,
    and the validating lookup says "no such zone" instead of raising."""
    assert known_zone(name) is None
    assert zone_of(name) is UTC_ZONE


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_settings_form_refuses_it_as_a_choice(name):
    """issue 34 item 4: the settings page offers a list; anything else is a form error."""
    form = SettingsForm({"channel": "", "timezone": name, "default_lead_minutes": "10"})
    assert not form.is_valid()
    assert "timezone" in form.errors
