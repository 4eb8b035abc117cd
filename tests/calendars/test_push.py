"""Push from Google and Graph, end to end: the real client code against the fakes,
the fakes posting real notifications to the app on 127.0.0.1, and the minute job.

Time is replayed: the fakes' channel clocks and every job's ``now`` move
together, so a day of channel life takes milliseconds.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from calendars.models import PushState, PushWork
from calendars.push import worklist
from console.health import check_health
from core.config import NudgeConfig
from portal.calendar_links import disconnect
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from sweeps.sync_changed import run_sync_changed
from tenancy.scope import tenant_scope
from tests.calendars.conftest import NOW, reload
from tests.calendars.push_support import (
    admin_push_cell,
    enroll,
    minutes,
    pending_nudges,
    titles,
)
from tests.fakes.google_server import google_event
from tests.fakes.microsoft_server import graph_event
from tests.support.recording import RecordingChannel

T = NOW
START = T + timedelta(hours=1)


@pytest.fixture
def google_setup(push_settings, fake_google, google_connection, make_user):
    """A Google user with one meeting at START (nudge at START - 10 min) and a live channel."""
    fake_google.push.clock = T
    fake_google.events["primary"] = [
        google_event("standup", START, START + minutes(30), summary="Stand-up")
    ]
    user = make_user()
    connection = google_connection(user)
    enroll(connection, T)
    assert run_sync_changed(T).channels == {"created": 1}
    fake_google.push.join()  # the channel's "sync" message has been answered
    run_materialize(T, user_ids=[user.pk])
    return user, connection


@pytest.fixture
def graph_setup(push_settings, fake_graph, graph_connection, make_user):
    fake_graph.push.clock = T
    fake_graph.events = [graph_event("review", START, START + minutes(30), reminder=10)]
    user = make_user()
    connection = graph_connection(user)
    enroll(connection, T)
    assert run_sync_changed(T).channels == {"created": 1}
    run_materialize(T, user_ids=[user.pk])
    return user, connection


@pytest.fixture
def graph_on_real_clock(push_settings, fake_graph, graph_connection, make_user):
    """A Graph subscription made at the real time: the app stamps what its endpoints
    receive with the real clock, so tests of lifecycle notifications follow it."""
    fake_graph.push.clock = None
    fake_graph.events = [graph_event("review", START, START + minutes(30), reminder=10)]
    user = make_user()
    connection = graph_connection(user)
    now = timezone.now()
    enroll(connection, now)
    assert run_sync_changed(now).channels == {"created": 1}
    return user, connection


def test_a_cancellation_3_minutes_before_the_nudge_sends_nothing(
    google_setup, fake_google, recording_channel
):
    user, connection = google_setup
    [nudge] = pending_nudges(user.pk)
    assert nudge.fire_at == START - minutes(10)
    assert reload(connection).push_state == PushState.LIVE
    # The 15-minute cycle no longer asks Google: the channel will say when something changes.
    calls = len(fake_google.events_calls())
    run_materialize(T + minutes(15), user_ids=[user.pk])
    assert len(fake_google.events_calls()) == calls

    cancelled_at = START - minutes(13)
    fake_google.push.clock = cancelled_at
    posted = fake_google.change(lambda events: events[0].update(status="cancelled"))
    assert [p.status for p in posted] == [200]
    assert pending_nudges(user.pk) == [nudge]  # the endpoint only marks; the job fetches

    report = run_sync_changed(cancelled_at + minutes(1))

    assert report.connections == {"synced": 1} and report.requeued.removed == 1
    assert pending_nudges(user.pk) == []
    run_deliver(START - minutes(10))
    assert RecordingChannel.sent == []


def test_a_moved_event_moves_its_nudge(graph_setup, fake_graph):
    user, _connection = graph_setup
    [nudge] = pending_nudges(user.pk)
    assert nudge.fire_at == START - minutes(10)
    later = START + minutes(45)

    def move(events):
        events[0]["_start"], events[0]["_end"] = later, later + minutes(30)

    fake_graph.push.clock = T + minutes(20)
    assert [p.status for p in fake_graph.change(move)] == [202]
    run_sync_changed(T + minutes(21))

    assert [n.fire_at for n in pending_nudges(user.pk)] == [later - minutes(10)]


def test_a_flood_of_notifications_is_one_sync(google_setup, fake_google):
    _user, connection = google_setup
    calls = len(fake_google.events_calls())
    for i in range(30):
        fake_google.change(lambda events, i=i: events[0].update(summary=f"Stand-up v{i}"))

    report = run_sync_changed(T + minutes(5))

    assert report.connections == {"synced": 1}
    assert len(fake_google.events_calls()) == calls + 1
    assert titles(connection) == ["Stand-up v29"]
    # Nothing left over for the next minute.
    assert run_sync_changed(T + minutes(6)).connections == {}


def test_google_channel_is_replaced_before_it_expires_and_the_old_one_stopped(
    google_setup, fake_google
):
    _user, connection = google_setup
    old = reload(connection)
    expires = old.push_expires_at
    assert expires == T + timedelta(days=7)
    # Not due a day before the renewal point; due after it.
    assert run_sync_changed(expires - timedelta(hours=13)).channels == {}
    fake_google.push.clock = expires - timedelta(hours=11)
    assert run_sync_changed(expires - timedelta(hours=11)).channels == {"renewed": 1}

    new = reload(connection)
    assert new.push_channel_id != old.push_channel_id
    assert new.push_expires_at > expires
    assert fake_google.stopped == [old.push_channel_id]
    assert [c.id for c in fake_google.live_channels()] == [new.push_channel_id]
    # The new channel's notifications are accepted.
    fake_google.push.join()
    assert [p.status for p in fake_google.notify()] == [200]


def test_graph_subscription_is_renewed_before_it_expires(graph_setup, fake_graph):
    _user, connection = graph_setup
    before = reload(connection)
    renew_at = before.push_expires_at - timedelta(hours=11)
    fake_graph.push.clock = renew_at

    assert run_sync_changed(renew_at).channels == {"renewed": 1}

    after = reload(connection)
    assert after.push_channel_id == before.push_channel_id
    assert after.push_expires_at > before.push_expires_at
    assert len(fake_graph.subscription_calls("PATCH")) == 1
    assert [p.status for p in fake_graph.change(lambda events: None)] == [202]


def test_graph_validation_handshake_echoes_the_token(app_url):
    token = "Validation: Testing client application reachability <b>x</b>"
    response = requests.post(
        f"{app_url}/calendars/push/microsoft/", params={"validationToken": token}, timeout=5
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    assert response.text == token


def test_a_removed_subscription_falls_back_to_polling_and_shows_in_admin_and_health(
    graph_on_real_clock, fake_graph, client
):
    user, connection = graph_on_real_clock
    subscription_id = reload(connection).push_channel_id
    fake_graph.next_subscription_answers = [_graph_error(503)]  # the first new one fails
    assert fake_graph.lifecycle(subscription_id, "subscriptionRemoved").status == 202
    # Nothing is believed from the notification itself ...
    assert reload(connection).push_state == PushState.LIVE

    # ... the next minute job asks Graph, which no longer has it: polled, and fetched now.
    now = timezone.now() + minutes(1)
    calls = len(fake_graph.view_calls())
    report = run_sync_changed(now)
    assert report.channels == {"failed": 1} and report.connections == {"synced": 1}
    assert len(fake_graph.view_calls()) == calls + 1
    row = reload(connection)
    assert row.push_state == PushState.LAPSED
    assert row.push_error.startswith("Graph removed the subscription")
    health = check_health(now)
    push_check = next(c for c in health.checks if c.name == "calendar_push")
    assert "1 polled" in push_check.detail
    staff = _staff(client)
    assert admin_push_cell(staff, connection) == "Polled: push lapsed or was removed"
    assert admin_push_cell(staff, connection, push_state__exact="lapsed") is not None
    assert admin_push_cell(staff, connection, push_state__exact="live") is None
    # Polled every cycle meanwhile.
    calls = len(fake_graph.view_calls())
    run_materialize(now + minutes(15), user_ids=[user.pk])
    assert len(fake_graph.view_calls()) == calls + 1
    # An hour later the minute job makes a new subscription, and push is live again.
    fake_graph.push.clock = now + minutes(61)
    assert run_sync_changed(now + minutes(61)).channels == {"created": 1}
    assert reload(connection).push_state == PushState.LIVE
    assert [s.id for s in fake_graph.live_subscriptions()] != [subscription_id]
    assert admin_push_cell(staff, connection) == "Push live"


def test_replayed_graph_lifecycle_notifications_change_nothing(
    graph_on_real_clock, fake_graph, client
):
    _user, connection = graph_on_real_clock
    sub = fake_graph.live_subscriptions()[0]
    # A genuine reauthorizationRequired, answered by the next minute job.
    genuine = fake_graph.lifecycle(sub.id, "reauthorizationRequired")
    later = timezone.now() + minutes(1)
    assert run_sync_changed(later).channels == {"renewed": 1}
    answered = reload(connection)
    patches = len(fake_graph.subscription_calls("PATCH"))

    # Sent again by someone who captured it; and a subscriptionRemoved for the
    # subscription Graph still has (its clientState captured likewise).
    assert fake_graph.push.replay(genuine).status == 202
    removal = fake_graph.lifecycle_body(sub, "subscriptionRemoved")
    assert fake_graph.push.post(sub.lifecycle_url, headers={}, json_body=removal).status == 202
    report = run_sync_changed(later + minutes(1))

    assert report.channels == {"kept": 1} and report.connections == {}
    row = reload(connection)
    assert row.push_state == PushState.LIVE and row.push_error == ""
    assert row.push_expires_at == answered.push_expires_at
    assert row.push_channel_id == sub.id
    assert len(fake_graph.subscription_calls("PATCH")) == patches
    assert [s.id for s in fake_graph.live_subscriptions()] == [sub.id]
    assert not PushWork.objects.get(connection_id=connection.pk).polling
    assert admin_push_cell(_staff(client), connection) == "Push live"


def test_a_lapsed_google_channel_falls_back_to_polling(google_setup, fake_google, client):
    user, connection = google_setup
    expires = reload(connection).push_expires_at
    # Renewal keeps failing (Google answers 500), and the channel runs out.
    fake_google.next_watch_answers = [fake_google_error(500) for _ in range(60)]
    fake_google.push.clock = expires - timedelta(hours=11)
    assert run_sync_changed(expires - timedelta(hours=11)).channels == {"failed": 1}
    assert reload(connection).push_state == PushState.LIVE  # still live until it expires

    after = expires + minutes(1)
    fake_google.push.clock = after
    calls = len(fake_google.events_calls())
    run_materialize(after, user_ids=[user.pk])
    assert len(fake_google.events_calls()) == calls + 1  # polled
    # The admin reads the real clock: the channel ran out by it too.
    with tenant_scope(user.pk):
        type(connection).objects.filter(pk=connection.pk).update(
            push_expires_at=timezone.now() - minutes(1)
        )
    cell = admin_push_cell(_staff(client), connection)
    assert cell == "polled: push lapsed (expired or not configured)"


def test_a_channel_that_cannot_be_created_leaves_the_calendar_polled(
    push_settings, fake_google, google_connection, make_user
):
    fake_google.push.clock = T
    fake_google.next_watch_answers = [
        fake_google_error(403, "pushNotSupportedForRequestedResource")
    ]
    connection = google_connection(make_user())
    enroll(connection, T)

    assert run_sync_changed(T).channels == {"failed": 1}
    row = reload(connection)
    assert row.push_state == PushState.FAILED and "403" in row.push_error
    assert PushWork.objects.get(connection_id=connection.pk).polling
    # Tried again an hour later.
    assert run_sync_changed(T + minutes(59)).channels == {}
    assert run_sync_changed(T + minutes(61)).channels == {"created": 1}


def test_forged_unknown_and_replayed_google_notifications_change_nothing(
    google_setup, fake_google, app_url
):
    user, connection = google_setup
    channel = fake_google.live_channels()[0]
    genuine = fake_google.headers_for(channel, "exists")

    def post(**changes: str) -> int:
        headers = {**genuine, **changes}
        return requests.post(
            f"{app_url}/calendars/push/google/", headers=headers, timeout=5
        ).status_code

    assert post(**{"X-Goog-Channel-Token": "guessed"}) == 403
    assert post(**{"X-Goog-Resource-ID": "res-other"}) == 403
    other_user = f"nudge-{user.pk + 1}-{connection.pk}-{channel.id.rsplit('-', 1)[1]}"
    assert post(**{"X-Goog-Channel-ID": other_user}) == 403
    assert post(**{"X-Goog-Channel-ID": "not-ours"}) == 403
    assert not reload(connection).resync_requested
    assert worklist.take_changed() == []

    assert post() == 200  # the genuine one
    assert run_sync_changed(T + minutes(2)).connections == {"synced": 1}
    calls = len(fake_google.events_calls())

    assert post() == 200  # its replay, after the change was fetched: answered, ignored
    assert not reload(connection).resync_requested
    assert run_sync_changed(T + minutes(3)).connections == {}
    assert len(fake_google.events_calls()) == calls


def test_a_forged_graph_client_state_changes_nothing(graph_setup, fake_graph, app_url):
    _user, connection = graph_setup
    sub = fake_graph.live_subscriptions()[0]
    body = fake_graph.notification(sub, "updated", "review")
    user_part = sub.client_state.split(".")[0]
    body["value"][0]["clientState"] = f"{user_part}.guessed-secret"
    url = f"{app_url}/calendars/push/microsoft/"

    assert requests.post(url, json=body, timeout=5).status_code == 403
    lifecycle = {"value": [{**body["value"][0], "lifecycleEvent": "subscriptionRemoved"}]}
    assert requests.post(f"{url}lifecycle/", json=lifecycle, timeout=5).status_code == 403
    row = reload(connection)
    assert row.push_state == PushState.LIVE and not row.resync_requested
    assert worklist.take_changed() == []


def test_disconnect_stops_the_google_channel(google_setup, fake_google):
    user, connection = google_setup
    channel_id = reload(connection).push_channel_id

    disconnect(user.pk, connection.pk, T + minutes(5))
    assert fake_google.stopped == []  # not from the request
    run_sync_changed(T + minutes(5))

    assert fake_google.stopped == [channel_id]
    assert not PushWork.objects.filter(connection_id=connection.pk).exists()


def test_disconnect_deletes_the_graph_subscription(graph_setup, fake_graph):
    user, connection = graph_setup
    subscription_id = reload(connection).push_channel_id

    disconnect(user.pk, connection.pk, T + minutes(5))
    run_sync_changed(T + minutes(5))

    assert fake_graph.deleted == [subscription_id]
    assert fake_graph.live_subscriptions() == []


def test_the_safety_poll_and_the_window_bring_a_quiet_calendar_back(google_setup, fake_google):
    """No notification for hours: fetched again at the safety poll (6 h), not before."""
    user, _connection = google_setup
    calls = len(fake_google.events_calls())
    for quarter in range(1, 24):  # up to 5 h 45
        run_materialize(T + minutes(15 * quarter), user_ids=[user.pk])
    assert len(fake_google.events_calls()) == calls
    run_materialize(T + timedelta(hours=6), user_ids=[user.pk])
    assert len(fake_google.events_calls()) == calls + 1


def test_without_a_public_address_nothing_changes(
    settings, fake_google, google_connection, make_user
):
    settings.CALENDAR_PUSH_BASE_URL = ""
    user = make_user()
    enroll(google_connection(user), T)
    report = run_sync_changed(T)
    assert not report.push_configured
    assert fake_google.watch_calls() == []
    run_materialize(T, user_ids=[user.pk])
    run_materialize(T + minutes(15), user_ids=[user.pk])
    assert len(fake_google.events_calls()) == 2  # polled every cycle, as before


def _graph_error(status: int):
    from tests.fakes.microsoft_server import _graph_error

    return _graph_error(status, "ServiceUnavailable", "scripted")


def fake_google_error(status: int, reason: str = "backendError"):
    from tests.fakes.google_server import _error

    return _error(status, "scripted", reason)


def _staff(client):
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_user(
        "support-push", "s@example.com", "pw", is_staff=True, is_superuser=True
    )
    client.force_login(staff)
    return client


def test_reauthorization_required_renews_at_the_next_minute(graph_on_real_clock, fake_graph):
    _user, connection = graph_on_real_clock
    before = reload(connection)
    assert fake_graph.lifecycle(before.push_channel_id, "reauthorizationRequired").status == 202
    # Still on push until the minute job, which asks Graph and renews (PATCH re-authorises).
    row = reload(connection)
    assert row.push_state == PushState.LIVE and row.push_expires_at == before.push_expires_at
    assert run_sync_changed(timezone.now() + minutes(1)).channels == {"renewed": 1}
    after = reload(connection)
    assert after.push_channel_id == before.push_channel_id
    assert after.push_state == PushState.LIVE
    assert after.push_expires_at > before.push_expires_at
    assert len(fake_graph.subscription_calls("PATCH")) == 1


def test_missed_notifications_fetch_again(graph_setup, fake_graph):
    _user, connection = graph_setup
    calls = len(fake_graph.view_calls())
    assert fake_graph.lifecycle(reload(connection).push_channel_id, "missed").status == 202
    assert run_sync_changed(T + minutes(2)).connections == {"synced": 1}
    assert len(fake_graph.view_calls()) == calls + 1


def test_connecting_through_oauth_enrolls_the_connection(make_user, fake_google):
    from calendars.connect import store_oauth_connection
    from providers.oauth import TokenGrant

    user = make_user()
    access, refresh = fake_google.issue_tokens()
    grant = TokenGrant(access_token=access, refresh_token=refresh, expires_at=T + minutes(60))
    connection = store_oauth_connection(
        user.pk, "google", account="me@example.com", grant=grant, config=NudgeConfig.from_settings()
    )
    work = PushWork.objects.get(connection_id=connection.pk)
    assert work.user_id == user.pk and work.maintain_at is not None


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("", True),
        ("https://nudge.example.com", True),
        ("http://127.0.0.1:8000", True),
        ("http://nudge.example.com", False),
        ("https://nudge.example.com/?x=1", False),
    ],
)
def test_the_public_address_must_be_https(settings, url, ok):
    from core.config import NudgeConfig

    settings.CALENDAR_PUSH_BASE_URL = url
    problems = NudgeConfig.from_settings(validate=False).problems()
    assert any("CALENDAR_PUSH_BASE_URL" in p for p in problems) is not ok


def test_sync_changed_command_says_when_push_is_off(db, settings):
    from io import StringIO

    from django.core.management import call_command

    settings.CALENDAR_PUSH_BASE_URL = ""
    out = StringIO()
    call_command("sync_changed", "--now", "2026-12-02T08:00:00Z", stdout=out)
    assert "push is not configured" in out.getvalue()


def test_health_fails_when_notified_calendars_wait(db, settings):
    settings.CALENDAR_PUSH_BASE_URL = "https://nudge.example.com"
    now = timezone.now()
    PushWork.objects.create(connection_id=1, user_id=1, polling=False)
    PushWork.objects.create(connection_id=2, user_id=1, polling=True)
    check = next(c for c in check_health(now).checks if c.name == "calendar_push")
    assert check.ok and "1 calendars on push, 1 polled" in check.detail

    PushWork.objects.filter(connection_id=1).update(changed_at=now - minutes(6))
    check = next(c for c in check_health(now).checks if c.name == "calendar_push")
    assert not check.ok and "sync_changed" in check.detail
