"""Issue 34, items 1-3: the calendar push endpoints, posted to by anyone.

Each connection here is written as a live channel would leave it (its id, its
secret's digest), and the endpoints are called through Django's test client.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta

import pytest
from django.db import connection as db
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from calendars.models import CalendarConnection, PushState
from calendars.push import notifications, worklist
from core.bearer import digest
from tenancy.scope import tenant_scope
from tests.calendars.conftest import (  # noqa: F401 — fixtures
    NOW,
    calendar_settings,
    fake_google,
    google_connection,
    make_connection,
)

pytestmark = pytest.mark.django_db

GRAPH_URL = "/calendars/push/microsoft/"
LIFECYCLE_URL = "/calendars/push/microsoft/lifecycle/"
GOOGLE_URL = "/calendars/push/google/"
SECRET = secrets.token_urlsafe(32)


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False


@pytest.fixture
def client():
    return Client(raise_request_exception=False)


def reload(row: CalendarConnection) -> CalendarConnection:
    with tenant_scope(row.user_id):
        return CalendarConnection.objects.get(pk=row.pk)


@pytest.fixture
def subscription(make_user):
    """A Microsoft connection with a live Graph subscription, on the work list."""
    user = make_user()
    row = make_connection(
        user,
        "microsoft",
        account="someone@example.com",
        push_state=PushState.LIVE,
        push_channel_id="sub-live-1",
        push_secret_digest=digest(SECRET),
        push_expires_at=timezone.now() + timedelta(days=2),
    )
    worklist.enroll(row.pk, user.pk, timezone.now())
    return row


def item(row: CalendarConnection, *, secret: str = SECRET, sub: str = "", **extra) -> dict:
    return {
        "subscriptionId": sub or row.push_channel_id,
        "clientState": f"{row.user_id}.{secret}",
        "changeType": "updated",
        "resource": "Users/x/Events/y",
        **extra,
    }


def post(client: Client, items: list | object, url: str = GRAPH_URL):
    body = {"value": items} if isinstance(items, list) else items
    return client.post(url, json.dumps(body), content_type="application/json")


def statements(client: Client, items: list) -> tuple[int, int]:
    with CaptureQueriesContext(db) as queries:
        response = post(client, items)
    return response.status_code, len(queries)


# --- item 1: amplification ------------------------------------------------------------


def test_a_thousand_forged_graph_items_cost_what_one_costs(client, subscription):
    """issue 34 item 1 (Graph push amplification): a ~100 KB batch of 1,000 forged
    items cost ~4,000 statements before its 403; it now costs those of one forged item,
    whether the items repeat one subscription or each name another."""
    forged = item(subscription, secret="guessed-secret")
    status, one = statements(client, [forged])
    assert status == 403
    assert one > 0  # the one check does reach the database

    status, same = statements(client, [forged] * 1000)
    assert status == 403
    assert same <= one

    distinct = [{**forged, "subscriptionId": f"sub-forged-{i}"} for i in range(1000)]
    assert len(json.dumps({"value": distinct})) > 90_000
    status, many = statements(client, distinct)
    assert status == 403
    assert many <= one

    row = reload(subscription)
    assert not row.resync_requested
    assert worklist.take_changed() == []


def test_a_genuine_batch_is_checked_once_and_still_counts(client, subscription):
    """issue 34 item 1: grouping by subscription keeps a genuine batch working: many
    items of one subscription are one check and one mark; a forged item after them
    does not undo them."""
    genuine = item(subscription)
    status, _ = statements(client, [genuine] * 50 + [item(subscription, secret="forged")])
    assert status == 202
    assert reload(subscription).resync_requested
    assert [w.connection_id for w in worklist.take_changed()] == [subscription.pk]


def test_the_graph_body_and_item_count_are_capped(client, subscription):
    """issue 34 item 1: a body over the cap is refused unread (413); a batch over the
    item cap is refused before any item is looked at."""
    padding = "x" * (notifications.MAX_GRAPH_BODY_BYTES + 1)
    with CaptureQueriesContext(db) as queries:
        response = client.post(GRAPH_URL, padding, content_type="application/json")
    assert response.status_code == 413
    assert len(queries) == 0

    too_many = [item(subscription)] * (notifications.MAX_GRAPH_ITEMS + 1)
    with CaptureQueriesContext(db) as queries:
        response = post(client, too_many)
    assert response.status_code == 403
    assert len(queries) == 0
    assert not reload(subscription).resync_requested


def test_malformed_items_cost_no_statement(client, subscription):
    """issue 34 item 1: items that are not shaped like Graph's are refused without a query."""
    malformed = [
        "text",
        {"subscriptionId": 7, "clientState": f"{subscription.user_id}.{SECRET}"},
        {"subscriptionId": "s" * 256, "clientState": f"{subscription.user_id}.{SECRET}"},
        {"subscriptionId": "sub", "clientState": "no-user-here"},
        {**item(subscription), "lifecycleEvent": "missed"},  # lifecycle on the change URL
    ]
    with CaptureQueriesContext(db) as queries:
        response = post(client, malformed * 200)
    assert response.status_code == 403
    assert len(queries) == 0


# --- item 2: nested JSON ------------------------------------------------------------------


@pytest.mark.parametrize("url", [GRAPH_URL, LIFECYCLE_URL])
def test_deeply_nested_json_on_the_graph_endpoints_is_a_400(client, url):
    """issue 34 item 2 (nested JSON 500): 10 KB of nested arrays raised RecursionError
    on both Graph endpoints; the shared depth-limited parse refuses it with a 400."""
    body = "[" * 5000 + "]" * 5000
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 400
    deep_inside = json.dumps({"value": [{"resourceData": json.loads("[" * 40 + "]" * 40)}]})
    assert client.post(url, deep_inside, content_type="application/json").status_code == 400


def test_the_api_keeps_its_words_for_bad_json(make_user):
    """issue 34 item 2: the API reads its body through the same function and still
    answers in its own words."""
    from portal.tokens import new_api_token

    user = make_user()
    with tenant_scope(user.pk):
        _, token = new_api_token(user.pk, "host")
    api = Client(raise_request_exception=False)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for body, words in [
        ("[" * 8000 + "]" * 8000, "the body is nested too deeply"),
        ("{", "the body is not valid JSON"),
        (b"\xff\xfe\xff", "the body is not valid JSON"),
    ]:
        response = api.post("/api/follow-ups", body, content_type="application/json", **headers)
        assert response.status_code == 400
        assert response.json() == {"error": words}


def test_the_depth_limit_ignores_brackets_inside_strings():
    """issue 34 item 2: the count skips strings, so a title full of brackets is fine."""
    from core import json_input

    assert json_input.parse('{"title": "' + "[" * 500 + '"}') == {"title": "[" * 500}
    with pytest.raises(json_input.JsonInputError, match="nested too deeply"):
        json_input.parse("[" * (json_input.MAX_DEPTH + 1) + "]" * (json_input.MAX_DEPTH + 1))
    assert json_input.parse("[" * json_input.MAX_DEPTH + "]" * json_input.MAX_DEPTH)


# --- item 3: Google's message number -----------------------------------------------------


@pytest.fixture
def channel(make_user):
    """A Google connection with a live channel whose last message number is 10."""
    user = make_user()
    row = make_connection(user, "google", account="someone@example.com")
    channel_id = f"nudge-{user.pk}-{row.pk}-abcdefabcdefabcd"
    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(pk=row.pk).update(
            push_state=PushState.LIVE,
            push_channel_id=channel_id,
            push_resource_id="res-1",
            push_secret_digest=digest(SECRET),
            push_expires_at=timezone.now() + timedelta(days=2),
            push_message_number=10,
        )
    worklist.enroll(row.pk, user.pk, timezone.now())
    return reload(row)


def notify(client: Client, row: CalendarConnection, number: str, state: str = "exists") -> int:
    headers = {
        "HTTP_X_GOOG_CHANNEL_ID": row.push_channel_id,
        "HTTP_X_GOOG_CHANNEL_TOKEN": SECRET,
        "HTTP_X_GOOG_RESOURCE_ID": row.push_resource_id,
        "HTTP_X_GOOG_RESOURCE_STATE": state,
        "HTTP_X_GOOG_MESSAGE_NUMBER": number,
    }
    return client.post(GOOGLE_URL, **headers).status_code


@pytest.mark.parametrize(
    "number",
    [str(2**63), "9" * 4000, "-5", "+11", " 12", "1_000", "١٢", "12.0", "0x20", ""],
)
def test_a_message_number_that_is_not_a_bigint_is_refused_not_a_500(client, channel, number):
    """issue 34 item 3 (message-number poisoning): 2**63 or a 4,000-digit number was a
    500; anything but plain digits within a bigint is refused (403) and stores nothing."""
    assert notify(client, channel, number) == 403
    row = reload(channel)
    assert row.push_message_number == 10 and not row.resync_requested


def test_a_number_far_ahead_does_not_become_the_mark(client, channel):
    """issue 34 item 3: 2**63-1 made every later genuine notification a replay. A number
    more than the window ahead still asks for a fetch (harmless) but is not kept."""
    assert notify(client, channel, str(2**63 - 1)) == 200
    row = reload(channel)
    assert row.push_message_number == 10
    assert row.resync_requested  # asked for a fetch, as any checked change does

    assert notify(client, channel, "11") == 200  # the next genuine one still counts
    assert reload(channel).push_message_number == 11
    assert notify(client, channel, "11") == 200  # and its replay is still one
    assert reload(channel).push_message_number == 11

    window = notifications.MESSAGE_NUMBER_WINDOW
    assert notify(client, channel, str(11 + window)) == 200  # at the window's edge: kept
    assert reload(channel).push_message_number == 11 + window
    assert notify(client, channel, str(12 + 2 * window)) == 200  # one past it: not kept
    assert reload(channel).push_message_number == 11 + window


def test_a_replay_is_still_a_replay(client, channel):
    """issue 34 item 3: the window does not weaken replay detection inside it."""
    assert notify(client, channel, "15") == 200
    with tenant_scope(channel.user_id):
        CalendarConnection.objects.filter(pk=channel.pk).update(resync_requested=False)
    assert notify(client, channel, "15") == 200  # Google retries what is not 2xx
    assert notify(client, channel, "12") == 200
    assert not reload(channel).resync_requested


def test_a_renewed_channel_numbers_from_zero(
    settings,
    fake_google,  # noqa: F811 — the fixture imported above
    google_connection,  # noqa: F811
    make_user,
):
    """issue 34 item 3: a channel's renewal resets the mark, so even a mark poisoned
    before this fix does not outlive the channel."""
    from calendars.push import channels
    from core.config import NudgeConfig

    settings.CALENDAR_PUSH_BASE_URL = "https://nudge.invalid"
    fake_google.push.clock = NOW
    row = google_connection(make_user())
    with tenant_scope(row.user_id):
        CalendarConnection.objects.filter(pk=row.pk).update(
            push_state=PushState.LIVE,
            push_channel_id=f"nudge-{row.user_id}-{row.pk}-old0old0old0old0",
            push_resource_id="res-old",
            push_secret_digest=digest(SECRET),
            push_expires_at=NOW + timedelta(minutes=5),  # due for renewal
            push_message_number=2**63 - 1,
        )
    outcome = channels.maintain(row.user_id, row.pk, NOW, NudgeConfig.from_settings())

    assert outcome == channels.Outcome.RENEWED
    renewed = reload(row)
    assert renewed.push_channel_id != f"nudge-{row.user_id}-{row.pk}-old0old0old0old0"
    assert renewed.push_message_number == 0
