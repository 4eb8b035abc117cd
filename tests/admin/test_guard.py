"""The support console filters only on what it shows, and logs staff reads of tenant rows."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from cryptography.fernet import Fernet
from django.urls import reverse

from calendars.models import CalendarConnection, Provider
from providers import crypto
from tenancy.scope import tenant_scope

CONNECTIONS = reverse("admin:calendars_calendarconnection_changelist")
QUEUE = reverse("admin:scheduled_sends_scheduledsend_changelist")


@pytest.fixture
def feed(make_user, settings):
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
    user = make_user("alice")
    with tenant_scope(user.pk):
        return CalendarConnection.objects.create(
            user=user,
            provider=Provider.ICS,
            feed_url_encrypted=crypto.encrypt("https://calendar.example/private.ics"),
            sync_state={"etag": "W/secret"},
        )


@pytest.mark.parametrize(
    "query",
    [
        "feed_url_encrypted__startswith=gAAAAA",  # ciphertext prefix
        "sync_state__contains=secret",  # hidden JSON
        "user__password__startswith=pbkdf2",  # through a relation
        "refresh_token_encrypted__regex=^gA",  # a regex oracle
    ],
)
def test_a_query_string_cannot_filter_on_hidden_columns(staff_client, feed, query):
    assert staff_client.get(f"{CONNECTIONS}?{query}").status_code == 400


@pytest.mark.parametrize(
    ("query", "listed"),
    [
        ("provider__exact=ics", {"alice"}),
        ("provider__exact=google", {"bob"}),
        ("status__exact=active", {"alice"}),
        ("status__exact=error", {"bob"}),
        ("status__exact=needs_reauth", set()),
        ("q=alice", {"alice"}),
        ("q=bob", {"bob"}),
        ("o=1", {"alice", "bob"}),
        ("", {"alice", "bob"}),
    ],
)
def test_the_pages_own_filters_still_work(staff_client, feed, make_user, query, listed):
    bob = make_user("bob")
    with tenant_scope(bob.pk):
        CalendarConnection.objects.create(
            user=bob, provider=Provider.GOOGLE, account="bob@example.com", status="error"
        )
    response = staff_client.get(f"{CONNECTIONS}?{query}")
    assert response.status_code == 200
    assert {row.user.username for row in response.context["cl"].result_list} == listed


def test_the_queue_filters_still_work(staff_client, make_user, make_send, make_state_rows):
    alice, bob = make_user("alice"), make_user("bob")
    rows = make_state_rows(alice)
    last_year = make_send(bob, kind="event", fire_at=datetime(2025, 6, 1, 9, 0, tzinfo=UTC))
    since = "fire_at__gte=2026-01-01+00:00:00%2B00:00"
    everything = {row.pk for row in rows.values()} | {last_year.pk}
    for query, listed in [
        ("state=stuck", {rows["stuck"].pk}),
        ("kind__exact=event", {last_year.pk}),
        (since, everything - {last_year.pk}),
        ("q=bob", {last_year.pk}),
        ("q=x", set()),
    ]:
        response = staff_client.get(f"{QUEUE}?{query}")
        assert response.status_code == 200, query
        assert {row.pk for row in response.context["cl"].result_list} == listed, query


def test_staff_reads_of_tenant_rows_are_logged(staff_client, support_user, feed, caplog):
    with caplog.at_level(logging.INFO, logger="nudge.admin.audit"):
        staff_client.get(f"{CONNECTIONS}?provider__exact=ics&q=alice")
        staff_client.get(reverse("admin:calendars_calendarconnection_change", args=[feed.pk]))
    listed, opened = [r for r in caplog.records if r.name == "nudge.admin.audit"]
    assert (listed.staff_user_id, listed.model, listed.rows) == (
        support_user.pk,
        "calendars.CalendarConnection",
        [str(feed.pk)],
    )
    assert listed.filters == {"provider__exact": "ics", "q": "alice"}
    assert (opened.staff_username, opened.rows) == (support_user.username, [str(feed.pk)])
