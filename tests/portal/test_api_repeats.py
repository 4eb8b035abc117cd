"""Issue 24 in the JSON API: a repeating follow-up with its own reminders, created,
changed and listed over real HTTP, and the OpenAPI schema that documents it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from followups.repeat import Repeat

from .conftest import pending
from .test_api import _plain_http, api, follow_ups_of  # noqa: F401 — fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_api_creates_a_weekly_follow_up_with_two_reminders(api):  # noqa: F811 — the fixture imported above
    """The API creates a recurring follow-up with reminders: weekly on Monday and
    Wednesday at the first time's Berlin wall clock, nudged 60 and 10 minutes before;
    the answer says so and names the next time; a PATCH of the reminders keeps the rule."""
    user, session, base = api
    first = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    body = {
        "title": "Gym",
        "due_at": first.isoformat(),
        "repeat": "weekly",
        "repeat_weekdays": ["mon", "wed"],
        "time_zone": "Europe/Berlin",
        "reminder_minutes": [60, 10],
    }
    created = session.post(f"{base}/follow-ups", json=body)
    assert created.status_code == 201, created.text
    answer = created.json()
    assert answer["repeat"] == "weekly"
    assert answer["repeat_weekdays"] == ["mon", "wed"]
    assert answer["time_zone"] == "Europe/Berlin"
    assert answer["reminder_minutes"] == [10, 60]
    assert answer["next_due_at"] is not None
    [saved] = follow_ups_of(user)
    assert (saved.repeat, saved.repeat_weekdays) == (Repeat.WEEKLY, [0, 2])

    changed = session.patch(f"{base}/follow-ups/{answer['id']}", json={"reminder_minutes": [5]})
    assert changed.status_code == 200, changed.text
    assert changed.json()["repeat"] == "weekly" and changed.json()["reminder_minutes"] == [5]
    for row in pending(user):  # whatever falls in the window is nudged 5 minutes before
        assert row.subject_starts_at - row.intended_at == timedelta(minutes=5)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"repeat": "hourly"}, "repeat must be one of"),
        ({"repeat": "weekly"}, "pick at least one day"),
        ({"repeat": "weekly", "repeat_weekdays": ["funday"]}, "repeat_weekdays are among"),
        ({"reminder_minutes": [0, 5, 10, 15, 30, 60]}, "at most 5 reminders"),
        ({"reminder_minutes": [-5]}, "between 0 and"),
        ({"reminder_minutes": "10"}, "reminder_minutes must be an array"),
        ({"time_zone": "Mars/Olympus"}, "IANA zone"),
    ],
)
def test_a_bad_repeat_or_reminder_is_a_clear_400_and_nothing_is_written(
    api,  # noqa: F811 — the fixture imported above
    extra,
    says,
):
    """Several reminders per item, up to the per-event cap; a rule the API cannot keep
    is refused in words, with nothing written."""
    user, session, base = api
    due = (timezone.now() + timedelta(hours=1)).isoformat()
    response = session.post(f"{base}/follow-ups", json={"title": "x", "due_at": due, **extra})
    assert response.status_code == 400
    assert says in response.json()["error"]
    assert follow_ups_of(user) == []


def test_the_schema_documents_repeats_and_reminders(
    api,  # noqa: F811 — the fixture imported above
    http_live_server,
):
    """The OpenAPI schema documents the recurring follow-up and its reminders, on create,
    on change and in the answer."""
    schema = requests.get(f"{http_live_server.url}/api/schema", timeout=5).json()
    schemas = schema["components"]["schemas"]
    for name in ("FollowUpCreate", "FollowUpPatch", "FollowUp"):
        properties = schemas[name]["properties"]
        assert properties["repeat"]["enum"] == ["once", "daily", "weekdays", "weekly", "monthly"]
        assert properties["repeat_weekdays"]["items"]["enum"][0] == "mon"
        assert properties["reminder_minutes"]["maxItems"] == 5
        assert "time_zone" in properties
    assert "next_due_at" in schemas["FollowUp"]["required"]
    assert "skipped" in schemas["FollowUp"]["properties"]["repeat"]["description"]
