"""A channel's first notifications race its creation: Google posts as soon as the
channel exists, Graph as soon as the subscription does, both possibly before the
app has stored the answer. A change landing in that instant must be fetched by the
minute job, not wait for the 6-hour safety poll; a forged one still changes nothing.
"""

from __future__ import annotations

from calendars.models import PushState
from sweeps.materialize import run_materialize
from sweeps.sync_changed import run_sync_changed
from tests.calendars.conftest import NOW, reload
from tests.calendars.push_support import enroll, minutes, pending_nudges
from tests.fakes.google_server import google_event
from tests.fakes.microsoft_server import graph_event

T = NOW
START = T + minutes(60)
MOVED = START + minutes(45)


def test_a_google_change_posted_before_the_watch_is_answered_is_fetched(
    push_settings, fake_google, google_connection, make_user
):
    fake_google.push.clock = T
    fake_google.events["primary"] = [google_event("standup", START, START + minutes(30))]
    user = make_user()
    connection = google_connection(user)
    run_materialize(T, user_ids=[user.pk])  # fetched once, before any channel
    assert [n.fire_at for n in pending_nudges(user.pk)] == [START - minutes(10)]
    forged = []

    def change_in_that_instant() -> None:
        fake_google.change(
            lambda events: events.__setitem__(
                0, google_event("standup", MOVED, MOVED + minutes(30))
            )
        )
        [channel] = fake_google.live_channels()
        headers = fake_google.headers_for(channel, "exists")
        forged.append(
            fake_google.push.post(
                channel.address, headers={**headers, "X-Goog-Channel-Token": "guessed"}
            )
        )

    fake_google.before_watch_answer = change_in_that_instant
    enroll(connection, T + minutes(1))
    report = run_sync_changed(T + minutes(1))
    fake_google.push.join()

    assert report.channels == {"created": 1}
    answers = {
        p.headers["X-Goog-Resource-State"]: p.status
        for p in fake_google.push.posted
        if p not in forged
    }
    assert answers == {"sync": 200, "exists": 200}
    assert [p.status for p in forged] == [403]
    row = reload(connection)
    assert row.push_state == PushState.LIVE and row.push_pending_channel_id == ""
    # Fetched by the minute job (this one or the next), not hours later.
    run_sync_changed(T + minutes(2))
    assert [n.fire_at for n in pending_nudges(user.pk)] == [MOVED - minutes(10)]


def test_a_graph_change_posted_before_the_subscription_is_answered_is_fetched(
    push_settings, fake_graph, graph_connection, make_user
):
    fake_graph.push.clock = T
    fake_graph.events = [graph_event("review", START, START + minutes(30), reminder=10)]
    user = make_user()
    connection = graph_connection(user)
    run_materialize(T, user_ids=[user.pk])
    assert [n.fire_at for n in pending_nudges(user.pk)] == [START - minutes(10)]

    def move(events):
        events[0]["_start"], events[0]["_end"] = MOVED, MOVED + minutes(30)

    fake_graph.before_subscription_answer = lambda: fake_graph.change(move)
    enroll(connection, T + minutes(1))
    report = run_sync_changed(T + minutes(1))

    assert report.channels == {"created": 1}
    assert [p.status for p in fake_graph.push.posted] == [202]
    row = reload(connection)
    assert row.push_state == PushState.LIVE and row.push_pending_digest == ""
    run_sync_changed(T + minutes(2))
    assert [n.fire_at for n in pending_nudges(user.pk)] == [MOVED - minutes(10)]
