"""Microsoft Graph: the real provider code against a fake Graph on 127.0.0.1."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from zoneinfo import ZoneInfo

import pytest

from providers import crypto
from providers import microsoft as graph_provider
from scheduled_sends.day import items_between
from tenancy.scope import tenant_scope
from tests.calendars.conftest import NOW, events_of, reload, run_sync
from tests.fakes.base import Answer
from tests.fakes.microsoft_server import FakeGraph, graph_event

T9 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_reminder_on_off_all_day_cancelled_declined(fake_graph, graph_connection):
    fake_graph.events = [
        graph_event("on", T9, T9 + HOUR, reminder=25),
        graph_event("off", T9 + HOUR, T9 + 2 * HOUR, reminder=None),
        {
            **graph_event(
                "all-day", datetime(2026, 12, 3, tzinfo=UTC), datetime(2026, 12, 4, tzinfo=UTC)
            ),
            "isAllDay": True,
        },
        {**graph_event("cancelled", T9, T9 + HOUR), "isCancelled": True},
        {
            **graph_event("declined", T9, T9 + HOUR),
            "responseStatus": {"response": "declined", "time": "2026-11-30T10:00:00Z"},
        },
        {
            **graph_event("tentative", T9, T9 + HOUR),
            "responseStatus": {"response": "tentativelyAccepted"},
        },
    ]
    connection = graph_connection()

    summary = run_sync(connection.user_id)

    assert summary.synced == 1
    rows = {e.provider_event_id: e for e in events_of(connection)}
    assert set(rows) == {"on", "off", "all-day", "declined", "tentative"}
    assert rows["on"].reminder_minutes == [25]
    assert rows["off"].reminder_minutes == []  # the sweep applies the user's default lead
    assert rows["all-day"].all_day
    assert rows["declined"].declined
    assert rows["tentative"].status == "tentative"


def test_times_are_requested_in_utc(fake_graph, graph_connection):
    fake_graph.events = [graph_event("a", T9, T9 + HOUR)]
    connection = graph_connection()

    run_sync(connection.user_id)

    [call] = fake_graph.view_calls()
    assert call.headers["Prefer"] == 'outlook.timezone="UTC"'
    assert (call.params["startDateTime"], call.params["endDateTime"]) == (
        "2026-12-02T07:45:00Z",
        "2026-12-03T11:00:00Z",
    )
    [row] = events_of(connection)
    assert row.starts_at == T9


def test_an_answer_in_an_iana_zone_is_still_read_correctly(fake_graph, graph_connection):
    event = graph_event("a", T9, T9 + HOUR)
    fake_graph.next_answers = [
        Answer.json(
            200,
            {
                "value": [
                    {
                        **{k: v for k, v in event.items() if not k.startswith("_")},
                        "start": {
                            "dateTime": "2026-12-02T10:00:00.0000000",
                            "timeZone": "Europe/Berlin",
                        },
                        "end": {
                            "dateTime": "2026-12-02T11:00:00.0000000",
                            "timeZone": "Europe/Berlin",
                        },
                    }
                ]
            },
        )
    ]
    connection = graph_connection()

    run_sync(connection.user_id)

    [row] = events_of(connection)
    assert row.starts_at == T9


def test_recurring_occurrences_and_a_moved_exception(fake_graph, graph_connection):
    def occurrence(day: int, start: datetime, kind: str = "occurrence") -> dict:
        original = datetime(2026, 12, day, 9, 0, tzinfo=UTC)
        return {
            **graph_event(f"occ-{day}", start, start + HOUR),
            "type": kind,
            "seriesMasterId": "series-1",
            "originalStart": original.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    fake_graph.events = [
        occurrence(2, T9),
        occurrence(3, datetime(2026, 12, 3, 10, 30, tzinfo=UTC), kind="exception"),
    ]
    connection = graph_connection()

    run_sync(connection.user_id)

    rows = events_of(connection)
    assert [(e.provider_event_id, e.occurrence_start, e.starts_at) for e in rows] == [
        ("series-1", T9, T9),
        (
            "series-1",
            datetime(2026, 12, 3, 9, 0, tzinfo=UTC),
            datetime(2026, 12, 3, 10, 30, tzinfo=UTC),
        ),
    ]


def test_requery_follows_the_moving_window_moves_and_deletes(fake_graph, graph_connection):
    fake_graph.events = [
        graph_event("moves", T9, T9 + HOUR),
        graph_event("goes-away", T9 + HOUR, T9 + 2 * HOUR),
        graph_event("later", T9 + 30 * HOUR, T9 + 31 * HOUR),
    ]
    connection = graph_connection()
    run_sync(connection.user_id)
    first = {e.provider_event_id: e for e in events_of(connection)}
    assert set(first) == {"moves", "goes-away"}

    fake_graph.events = [
        graph_event("moves", T9 + 3 * HOUR, T9 + 4 * HOUR),
        graph_event("later", T9 + 30 * HOUR, T9 + 31 * HOUR),
    ]
    summary = run_sync(connection.user_id, NOW + timedelta(hours=5))

    rows = {e.provider_event_id: e for e in events_of(connection)}
    assert set(rows) == {"moves", "later"}
    assert rows["moves"].pk == first["moves"].pk and rows["moves"].starts_at == T9 + 3 * HOUR
    assert (summary.events_created, summary.events_updated, summary.events_deleted) == (1, 1, 1)
    calls = fake_graph.view_calls()
    assert len(calls) == 2 and all("delta" not in c.path for c in calls)
    assert calls[1].params["startDateTime"] == "2026-12-02T12:45:00Z"


def test_refresh_tokens_rotate_and_each_new_one_is_stored(fake_graph, graph_connection):
    connection = graph_connection(token_expires_at=NOW - HOUR)
    first_refresh = crypto.decrypt(connection.refresh_token_encrypted)

    assert run_sync(connection.user_id).synced == 1
    second_refresh = crypto.decrypt(reload(connection).refresh_token_encrypted)
    assert second_refresh != first_refresh
    assert "offline_access" in fake_graph.token_calls()[0].params["scope"]

    # An hour later the rotated token is what gets used; the spent one would fail.
    later = NOW + 2 * HOUR
    assert run_sync(connection.user_id, later).synced == 1
    token_calls = fake_graph.token_calls()
    assert [c.params["refresh_token"] for c in token_calls] == [first_refresh, second_refresh]
    assert crypto.decrypt(reload(connection).refresh_token_encrypted) not in (
        first_refresh,
        second_refresh,
    )


def test_rotated_token_is_stored_even_when_the_events_call_fails(fake_graph, graph_connection):
    connection = graph_connection(token_expires_at=NOW - HOUR)
    first_refresh = crypto.decrypt(connection.refresh_token_encrypted)
    fake_graph.next_answers = [Answer.json(503, {"error": {"code": "ServiceUnavailable"}})]

    assert run_sync(connection.user_id).failed == 1

    stored = crypto.decrypt(reload(connection).refresh_token_encrypted)
    assert stored != first_refresh  # the spent one would now be invalid_grant
    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).synced == 1


def test_revoked_refresh_token_marks_needs_reauth(fake_graph, graph_connection):
    connection = graph_connection(token_expires_at=NOW - HOUR)
    fake_graph.revoke_all()

    summary = run_sync(connection.user_id)

    assert summary.needs_reauth == 1
    stored = reload(connection)
    assert stored.status == "needs_reauth" and "invalid_grant" in stored.last_error
    assert fake_graph.view_calls() == []


@pytest.mark.usefixtures("unpaced_providers")
def test_429_honours_retry_after(fake_graph, graph_connection):
    connection = graph_connection()
    fake_graph.next_answers = [
        Answer.json(429, {"error": {"code": "TooManyRequests"}}, ("Retry-After", "3600"))
    ]

    run_sync(connection.user_id)

    stored = reload(connection)
    assert stored.retry_after == NOW + HOUR and stored.status == "error"
    assert run_sync(connection.user_id, NOW + timedelta(minutes=45)).backing_off == 1
    assert run_sync(connection.user_id, NOW + timedelta(minutes=60)).synced == 1


@pytest.mark.parametrize(
    "answer",
    [
        Answer(200, b"<html>oops</html>", (("Content-Type", "text/html"),)),
        Answer.json(200, {"value": "nope"}),
        Answer.json(200, {"value": [], "@odata.nextLink": "https://elsewhere.example/steal"}),
    ],
    ids=["html", "value-not-a-list", "foreign-next-link"],
)
def test_malformed_payload_keeps_the_previous_copy(fake_graph, graph_connection, answer):
    fake_graph.events = [graph_event("a", T9, T9 + HOUR)]
    connection = graph_connection()
    run_sync(connection.user_id)
    fake_graph.next_answers = [answer]

    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).failed == 1
    assert [e.provider_event_id for e in events_of(connection)] == ["a"]


@pytest.mark.parametrize(
    "link",
    [
        "{elsewhere}/v1.0/me/calendarView?$skip=1",
        "{graph_scheme_https}/v1.0/me/calendarView?$skip=1",
        "http://{graph_host}@{elsewhere_host}/v1.0/me/calendarView?$skip=1",
    ],
    ids=["another-server", "another-scheme", "graph-as-userinfo"],
)
def test_a_next_link_off_the_configured_graph_gets_no_token(fake_graph, graph_connection, link):
    fake_graph.events = [graph_event("a", T9, T9 + HOUR)]
    connection = graph_connection()
    run_sync(connection.user_id)
    with FakeGraph() as elsewhere:
        graph_host = fake_graph.url.removeprefix("http://")
        foreign = link.format(
            elsewhere=elsewhere.url,
            elsewhere_host=elsewhere.url.removeprefix("http://"),
            graph_host=graph_host,
            graph_scheme_https=f"https://{graph_host}",
        )
        fake_graph.next_answers = [Answer.json(200, {"value": [], "@odata.nextLink": foreign})]

        summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

        assert elsewhere.requests == []
    assert summary.failed == 1
    assert reload(connection).last_error == "microsoft: @odata.nextLink points elsewhere"
    assert len(fake_graph.view_calls()) == 2  # the next link was not followed
    assert [e.provider_event_id for e in events_of(connection)] == ["a"]


def test_429_with_an_http_date_backs_off_until_that_date(fake_graph, graph_connection):
    connection = graph_connection()
    until = format_datetime(NOW + 2 * HOUR, usegmt=True)
    fake_graph.next_answers = [
        Answer.json(429, {"error": {"code": "TooManyRequests"}}, ("Retry-After", until))
    ]

    run_sync(connection.user_id)

    assert reload(connection).retry_after == NOW + 2 * HOUR


def test_one_bad_event_is_skipped(fake_graph, graph_connection):
    fake_graph.events = [
        graph_event("good", T9, T9 + HOUR),
        {**graph_event("bad-reminder", T9, T9 + HOUR), "reminderMinutesBeforeStart": "15"},
        {**graph_event("bad-flag", T9, T9 + HOUR), "isAllDay": "no"},
    ]
    connection = graph_connection()

    summary = run_sync(connection.user_id)

    assert summary.events_skipped == 2
    assert [e.provider_event_id for e in events_of(connection)] == ["good"]


def test_pages_follow_next_link(fake_graph, graph_connection, monkeypatch):
    monkeypatch.setattr(graph_provider, "PAGE_SIZE", 2)
    fake_graph.events = [graph_event(f"e{i}", T9 + i * HOUR, T9 + (i + 1) * HOUR) for i in range(5)]
    connection = graph_connection()

    summary = run_sync(connection.user_id)

    assert len(events_of(connection)) == 5 and summary.provider_calls == 3


def test_a_refresh_token_rotated_by_a_concurrent_sync_is_not_taken_for_revocation(
    fake_graph, graph_connection, monkeypatch
):
    """Two syncs of one connection both refresh; the second presents a spent token."""
    from calendars import sync as sync_module
    from calendars.models import CalendarConnection
    from tenancy.scope import tenant_scope

    connection = graph_connection(token_expires_at=NOW - HOUR)
    original_fetch = graph_provider.fetch

    def racing_fetch(snapshot, **kwargs):
        # Meanwhile another run rotates the token and stores the new one.
        _access, refresh = fake_graph.issue_tokens()
        fake_graph.refresh_tokens.discard(snapshot.refresh_token)
        with tenant_scope(snapshot.user_id):
            CalendarConnection.objects.filter(pk=snapshot.connection_id).update(
                refresh_token_encrypted=crypto.encrypt(refresh)
            )
        return original_fetch(snapshot, **kwargs)

    monkeypatch.setattr(graph_provider, "fetch", racing_fetch)
    summary = run_sync(connection.user_id)

    assert summary.needs_reauth == 0 and summary.failed == 1
    assert reload(connection).status == "error"
    monkeypatch.undo()
    assert sync_module  # the next run uses the other run's token and succeeds
    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).synced == 1


def test_an_all_day_event_is_its_day_in_the_owners_zone(fake_graph, graph_connection, make_user):
    # Graph gives an all-day event as midnight of its date, whatever the zone asked for:
    # a holiday on 3 December is 3 December for a New Yorker, not 19:00 the evening before.
    holiday = {
        **graph_event(
            "holiday", datetime(2026, 12, 3, tzinfo=UTC), datetime(2026, 12, 4, tzinfo=UTC)
        ),
        "isAllDay": True,
    }
    fake_graph.events = [holiday]
    user = make_user(timezone="America/New_York")
    connection = graph_connection(user)

    run_sync(user.pk)

    [row] = events_of(connection)
    assert row.all_day
    assert (row.starts_at, row.ends_at) == (
        datetime(2026, 12, 3, 5, 0, tzinfo=UTC),
        datetime(2026, 12, 4, 5, 0, tzinfo=UTC),
    )
    new_york = ZoneInfo("America/New_York")
    with tenant_scope(user.pk):
        today = items_between(
            user.pk,
            datetime(2026, 12, 2, tzinfo=new_york),
            datetime(2026, 12, 3, tzinfo=new_york),
            running_all_day=True,
        )
    assert today == []  # the day before, its agenda does not list tomorrow's holiday
