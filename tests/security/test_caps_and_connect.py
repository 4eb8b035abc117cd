"""Calendar connect off the request, one refusal for unusable addresses, per-user caps
and the API's per-account rate limit. Real HTTP to a fake feed; the real API views."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from accounts.models import DeliverySettings
from calendars.connect import REFUSED, ConnectError, add_ics_feed
from calendars.models import CalendarConnection, PushWork
from core.config import NudgeConfig
from followups import actions as followups
from portal.tokens import new_api_token
from scheduled_sends.queue.transitions import database_now
from sweeps.sync_changed import run_sync_changed
from tenancy.scope import tenant_scope
from tests.calendars.conftest import TEST_KEY
from tests.calendars.ics_samples import SINGLE
from tests.fakes.ics_server import FakeIcsFeed

PUBLIC_FEED = "http://93.184.216.34/calendar.ics"  # a literal public address: no DNS


@pytest.fixture(autouse=True)
def calendar_keys(settings):
    """Calendar secrets need a key outside the embedded database (the suite also runs
    against a real server)."""
    settings.CALENDAR_TOKEN_KEYS = [TEST_KEY]


def connections_of(user) -> list[CalendarConnection]:
    with tenant_scope(user.pk):
        return list(CalendarConnection.objects.filter(user_id=user.pk))


def test_adding_a_calendar_does_not_fetch_in_the_request(signed_in):
    """issue 23 item 7: adding a calendar fetched it inside the web request (a slow feed
    held a web worker ~30 s). Issue 34 item 9: the web process's own check threads let
    one account's slow feeds delay another's. The request only asks the minute job,
    in its own transaction, and the page says so."""
    user, client = signed_in("ana")
    response = client.post(reverse("portal:calendar_add_ics"), {"url": PUBLIC_FEED}, follow=True)
    page = response.content.decode()
    assert "Checking…" in page
    assert '<meta http-equiv="refresh"' in page  # the page comes back for the result
    [connection] = connections_of(user)
    assert connection.last_synced_at is None  # nothing was fetched in the request
    [work] = PushWork.objects.filter(connection_id=connection.pk)
    assert (work.user_id, work.push_capable) == (user.pk, False)
    assert work.changed_at is not None  # asked of the minute job


@pytest.mark.django_db(transaction=True)
def test_the_minute_job_fetches_and_the_page_shows_the_result(signed_in, settings):
    """issue 23 item 7: the user sees "checking…" then the result, once the minute job
    (which runs whether or not push is configured) has fetched the new calendar."""
    settings.CALENDAR_PUSH_BASE_URL = ""
    user, client = signed_in("ana")
    with FakeIcsFeed() as feed:
        feed.body = SINGLE
        add_ics_feed(user.pk, feed.feed_url, allow_private=True, config=NudgeConfig.from_settings())
        assert "Checking…" in client.get(reverse("portal:calendars")).content.decode()
        report = run_sync_changed(database_now())
        assert report.connections["synced"] == 1, report.summary()
        assert len(feed.feed_calls()) == 1
    page = client.get(reverse("portal:calendars")).content.decode()
    assert "Checking…" not in page and "last sync" in page
    assert '<meta http-equiv="refresh"' not in page


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/cal.ics", "http://10.1.2.3/cal.ics", "http://calendar.invalid/x"],
)
def test_an_unusable_address_gets_one_refusal_whatever_the_cause(signed_in, url):
    """issue 23 item 8: connect errors told "resolves to a private address" from
    "cannot resolve" (an internal DNS oracle)."""
    user, client = signed_in("ana")
    page = client.post(reverse("portal:calendar_add_ics"), {"url": url}).content.decode()
    errors = re.findall(r'<ul class="errorlist"[^>]*>(.*?)</ul>', page, re.S)
    assert errors == [f"<li>{escape(REFUSED)}</li>"]
    assert connections_of(user) == []


def test_calendars_per_user_are_capped(signed_in, settings, monkeypatch):
    """issue 23 item 7: no limit on the number of calendars per user."""
    settings.NUDGE_MAX_CALENDARS_PER_USER = 2
    user, client = signed_in("ana")
    for n in range(2):
        add_ics_feed(user.pk, f"http://93.184.216.34/{n}.ics", config=NudgeConfig.from_settings())
    with pytest.raises(ConnectError, match="the most allowed"):
        add_ics_feed(user.pk, "http://93.184.216.34/2.ics", config=NudgeConfig.from_settings())
    page = client.post(reverse("portal:calendar_add_ics"), {"url": PUBLIC_FEED}).content.decode()
    assert "the most allowed (2)" in page
    assert len(connections_of(user)) == 2
    assert REFUSED not in page
    # In the person's language, like every sentence of their pages.
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language="de")
    page = client.post(reverse("portal:calendar_add_ics"), {"url": PUBLIC_FEED}).content.decode()
    assert "Du hast 2 Kalender verbunden, das Maximum (2)." in page


def test_follow_ups_per_user_are_capped(signed_in, settings):
    """issue 23 item 7: no cap on follow-ups (50,000 made every write and sweep slow)."""
    settings.NUDGE_MAX_FOLLOW_UPS_PER_USER = 2
    user, _ = signed_in("ana")
    now = timezone.now()
    for n in range(2):
        followups.create_follow_up(
            user.pk, f"task {n}", now + timedelta(hours=1), now, NudgeConfig.from_settings()
        )
    with pytest.raises(followups.FollowUpInvalid, match="the most allowed"):
        followups.create_follow_up(
            user.pk, "one more", now + timedelta(hours=1), now, NudgeConfig.from_settings()
        )
    with tenant_scope(user.pk):
        _, token = new_api_token(user.pk, "host")
    answer = Client().post(
        "/api/follow-ups",
        {"title": "via the API", "due_at": (now + timedelta(hours=1)).isoformat()},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert answer.status_code == 400 and "the most allowed" in answer.json()["error"]


def test_api_tokens_per_user_are_capped(signed_in, settings):
    """issue 23 item 7: no cap on API tokens per user."""
    settings.NUDGE_MAX_API_TOKENS_PER_USER = 1
    _, client = signed_in("ana")
    client.post(reverse("portal:api_token_create"), {"name": "first"})
    page = client.post(reverse("portal:api_token_create"), {"name": "second"}).content.decode()
    assert "the most allowed" in page and "Your new API token" not in page


def test_the_api_is_rate_limited_per_account(signed_in, settings):
    """issue 23 item 7: no API rate limit (429 with Retry-After past the limit); issue 34
    finding 3: the limit is the account's, not each token's."""
    settings.NUDGE_API_REQUESTS_PER_MINUTE = 3
    user, _ = signed_in("ana")
    with tenant_scope(user.pk):
        _, first = new_api_token(user.pk, "first")
        _, second = new_api_token(user.pk, "second")
    api = Client()

    def get(token: str):
        return api.get("/api/follow-ups", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert [get(first).status_code for _ in range(3)] == [200, 200, 200]
    refused = get(first)
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert get(second).status_code == 429  # per account, not per token
