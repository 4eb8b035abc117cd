"""Calendar connections, events and follow-ups: read-only, and tokens never shown."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from calendars.models import CalendarConnection

from .conftest import SECRETS, reload

CONNECTIONS = reverse("admin:calendars_calendarconnection_changelist")


@pytest.fixture
def calendar_rows(make_user, make_event, make_follow_up, make_send):
    alice = make_user("alice")
    event = make_event(alice, "Standup")
    make_send(alice, kind="event", ref_id=event.pk)
    make_follow_up(alice, "Send the invoice")
    return alice, event


def admin_pages(client, alice, event) -> list[str]:
    """Every list page, the pages of the rows above, and the owner's pages."""
    urls = [reverse("admin:index"), reverse("admin:app_list", args=["calendars"])]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:{}_{}_changelist".format(*info)))
    for obj in (event.connection, event):
        info = (obj._meta.app_label, obj._meta.model_name)
        urls.append(reverse("admin:{}_{}_change".format(*info), args=[obj.pk]))
        urls.append(reverse("admin:{}_{}_history".format(*info), args=[obj.pk]))
    urls.append(reverse("admin:auth_user_change", args=[alice.pk]))
    urls.append(reverse("admin:auth_user_delete", args=[alice.pk]))
    return urls


def test_tokens_never_appear_in_any_admin_page(staff_client, calendar_rows):
    alice, event = calendar_rows

    for url in admin_pages(staff_client, alice, event):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        for secret in SECRETS:
            assert secret not in html, url
        assert "_encrypted" not in html, url


def test_tokens_are_not_searchable(staff_client, calendar_rows):
    for secret in SECRETS:
        response = staff_client.get(CONNECTIONS, {"q": secret[8:20]})
        assert response.context["cl"].result_count == 0


def test_connection_list_shows_status_and_last_error(staff_client, make_user, make_connection):
    make_connection(make_user("alice"), status="error", last_error="401 from provider")

    html = staff_client.get(CONNECTIONS).content.decode()

    assert "Last sync failed" in html
    assert "401 from provider" in html


def test_a_caldav_calendar_that_needs_its_password_again_says_so(
    staff_client, make_user, make_connection
):
    make_connection(
        make_user("alice"),
        provider="caldav",
        status="needs_reauth",
        last_error="caldav: the server refused the password; it needs your password again",
    )

    html = staff_client.get(CONNECTIONS).content.decode()

    assert "CalDAV" in html and "Needs re-authorisation" in html
    assert "it needs your password again" in html


def test_connections_events_and_follow_ups_are_read_only(staff_client, calendar_rows):
    _, event = calendar_rows
    for obj in (event.connection, event):
        info = (obj._meta.app_label, obj._meta.model_name)
        url = reverse("admin:{}_{}_change".format(*info), args=[obj.pk])
        assert staff_client.post(url, {"title": "x", "account": "x"}).status_code == 403
        delete = reverse("admin:{}_{}_delete".format(*info), args=[obj.pk])
        assert staff_client.post(delete, {"post": "yes"}).status_code == 403
    assert reload(event).title == "Standup"


def test_resync_now_only_raises_the_flag(staff_client, make_user, make_connection):
    connection = make_connection(make_user("alice"), last_error="timeout")

    response = staff_client.post(
        CONNECTIONS, {"action": "resync_now", "index": 0, "_selected_action": [connection.pk]}
    )

    assert response.status_code == 302
    after = reload(connection)
    assert after.resync_requested is True
    assert (after.access_token_encrypted, after.last_error, after.last_synced_at) == (
        connection.access_token_encrypted,
        "timeout",
        None,
    )
    assert LogEntry.objects.filter(object_id=str(connection.pk)).count() == 1


def test_resync_now_says_which_connections_the_next_run_will_not_fetch(
    staff_client, make_user, make_connection
):
    """It reported every selected connection as syncing on the next run, though that run
    skips one awaiting re-authorisation, one backing off, and local events."""
    alice = make_user("alice")
    ready = make_connection(alice)
    reauth = make_connection(alice, status="needs_reauth")
    backing_off = make_connection(
        alice, status="error", retry_after=datetime(2099, 1, 2, 3, 4, tzinfo=UTC)
    )
    local = make_connection(alice, provider="local")
    chosen = [ready.pk, reauth.pk, backing_off.pk, local.pk]

    response = staff_client.post(
        CONNECTIONS,
        {"action": "resync_now", "index": 0, "_selected_action": chosen},
        follow=True,
    )

    said = [str(message) for message in response.context["messages"]]
    assert said == [
        "1 connection(s) will sync on the next materialize run.",
        # In the list's order, newest first.
        f"Not synced on the next run: #{local.pk} holds local events: there is nothing to "
        f"sync; #{backing_off.pk} is backing off until 2099-01-02 03:04 UTC; "
        f"#{reauth.pk} needs its user to re-authorise it",
    ]


def test_resync_needs_the_change_permission(client, viewer_user, make_user, make_connection):
    connection = make_connection(make_user("alice"))
    client.force_login(viewer_user)

    assert client.get(CONNECTIONS).status_code == 200
    client.post(
        CONNECTIONS, {"action": "resync_now", "index": 0, "_selected_action": [connection.pk]}
    )

    assert reload(connection).resync_requested is False
    assert isinstance(reload(connection), CalendarConnection)
