"""Google Calendar: the real provider code against a fake Google on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from providers import crypto
from providers import google as google_provider
from tests.calendars.conftest import NOW, events_of, reload, run_sync
from tests.fakes.base import Answer
from tests.fakes.google_server import google_event

T9 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_reminders_override_default_none_and_email_only(fake_google, google_connection):
    fake_google.default_reminders = [{"method": "popup", "minutes": 10}]
    fake_google.events["primary"] = [
        google_event(
            "override",
            T9,
            T9 + HOUR,
            reminders={
                "useDefault": False,
                "overrides": [
                    {"method": "popup", "minutes": 30},
                    {"method": "email", "minutes": 60},
                    {"method": "popup", "minutes": 5},
                ],
            },
        ),
        google_event("default", T9 + HOUR, T9 + 2 * HOUR, reminders={"useDefault": True}),
        google_event("none", T9 + 2 * HOUR, T9 + 3 * HOUR, reminders={"useDefault": False}),
        google_event(
            "email-only",
            T9 + 3 * HOUR,
            T9 + 4 * HOUR,
            reminders={"useDefault": False, "overrides": [{"method": "email", "minutes": 9}]},
        ),
    ]
    connection = google_connection()

    summary = run_sync(connection.user_id)

    assert (summary.synced, summary.failed, summary.events_created) == (1, 0, 4)
    leads = {e.provider_event_id: e.reminder_minutes for e in events_of(connection)}
    assert leads == {"override": [5, 30], "default": [10], "none": [], "email-only": []}


def test_all_day_cancelled_and_declined(fake_google, google_connection):
    fake_google.time_zone = "Europe/Berlin"
    fake_google.events["primary"] = [
        {
            "id": "holiday",
            "status": "confirmed",
            "summary": "Holiday",
            "start": {"date": "2026-12-02"},
            "end": {"date": "2026-12-03"},
            "reminders": {"useDefault": True},
        },
        google_event("cancelled", T9, T9 + HOUR, status="cancelled"),
        google_event(
            "declined",
            T9,
            T9 + HOUR,
            attendees=[
                {"email": "boss@example.com", "responseStatus": "accepted"},
                {"email": "someone@example.com", "self": True, "responseStatus": "declined"},
            ],
        ),
        google_event(
            "accepted",
            T9,
            T9 + HOUR,
            attendees=[
                {"email": "someone@example.com", "self": True, "responseStatus": "accepted"}
            ],
        ),
    ]
    connection = google_connection()

    run_sync(connection.user_id)

    rows = {e.provider_event_id: e for e in events_of(connection)}
    assert set(rows) == {"holiday", "declined", "accepted"}
    assert rows["holiday"].all_day
    # Midnight in the calendar's zone (Berlin, UTC+1).
    assert rows["holiday"].starts_at == datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    assert rows["declined"].declined
    assert not rows["accepted"].declined and not rows["accepted"].all_day


def test_a_working_location_is_not_an_event(fake_google, google_connection):
    # Google lists working locations with the events (since March 2024); a timed one
    # ("Office, 9 to 17") is where the person works, not something starting in 10 minutes.
    fake_google.events["primary"] = [
        google_event(
            "office",
            T9,
            T9 + 8 * HOUR,
            summary="Office",
            eventType="workingLocation",
            reminders={"useDefault": False},
            workingLocationProperties={"type": "officeLocation", "officeLocation": {}},
        ),
        google_event("focus", T9 + HOUR, T9 + 2 * HOUR, eventType="focusTime"),
        google_event("meeting", T9 + 2 * HOUR, T9 + 3 * HOUR, eventType="default"),
    ]
    connection = google_connection()

    summary = run_sync(connection.user_id)

    assert (summary.synced, summary.events_skipped) == (1, 0)
    assert [e.provider_event_id for e in events_of(connection)] == ["focus", "meeting"]


def test_cancelling_a_stored_event_deletes_it(fake_google, google_connection):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    run_sync(connection.user_id)
    assert [e.provider_event_id for e in events_of(connection)] == ["a"]

    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR, status="cancelled")]
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.events_deleted == 1
    assert events_of(connection) == []


def test_recurring_instances_with_a_moved_exception_and_time_zones(fake_google, google_connection):
    def instance(day: int, start: datetime) -> dict:
        original = datetime(2026, 12, day, 9, 0, tzinfo=UTC)
        return {
            **google_event(f"weekly_202612{day:02d}T090000Z", start, start + HOUR),
            "recurringEventId": "weekly",
            "originalStartTime": {"dateTime": original.isoformat()},
        }

    fake_google.events["primary"] = [
        instance(2, T9),
        # The exception: this one instance moved from 09:00 to 10:30 Berlin time (09:30Z).
        {
            **instance(3, datetime(2026, 12, 3, 9, 0, tzinfo=UTC)),
            "start": {"dateTime": "2026-12-03T10:30:00+01:00", "timeZone": "Europe/Berlin"},
            "end": {"dateTime": "2026-12-03T11:30:00+01:00", "timeZone": "Europe/Berlin"},
        },
    ]
    connection = google_connection()

    run_sync(connection.user_id)

    rows = events_of(connection)
    assert [(e.provider_event_id, e.occurrence_start, e.starts_at) for e in rows] == [
        ("weekly", T9, T9),
        (
            "weekly",
            datetime(2026, 12, 3, 9, 0, tzinfo=UTC),
            datetime(2026, 12, 3, 9, 30, tzinfo=UTC),
        ),
    ]


def test_a_moved_event_updates_the_same_row(fake_google, google_connection):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    run_sync(connection.user_id)
    [before] = events_of(connection)

    fake_google.events["primary"] = [google_event("a", T9 + 2 * HOUR, T9 + 3 * HOUR)]
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    [after] = events_of(connection)
    assert after.pk == before.pk  # queued nudges reference this id
    assert after.starts_at == T9 + 2 * HOUR
    assert (summary.events_created, summary.events_updated, summary.events_deleted) == (0, 1, 0)


def test_an_unchanged_window_writes_nothing(fake_google, google_connection):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    run_sync(connection.user_id)
    [before] = events_of(connection)

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    [after] = events_of(connection)
    assert after.updated_at == before.updated_at
    assert (summary.events_created, summary.events_updated, summary.events_deleted) == (0, 0, 0)


def test_expiring_access_token_is_refreshed_and_stored_encrypted(fake_google, google_connection):
    connection = google_connection(token_expires_at=NOW + timedelta(minutes=2))
    old_access = crypto.decrypt(connection.access_token_encrypted)

    summary = run_sync(connection.user_id)

    assert summary.synced == 1
    assert len(fake_google.token_calls()) == 1
    stored = reload(connection)
    new_access = crypto.decrypt(stored.access_token_encrypted)
    assert new_access != old_access
    assert new_access not in stored.access_token_encrypted
    assert stored.token_expires_at == NOW + timedelta(seconds=3600)
    assert fake_google.events_calls()[-1].headers["Authorization"] == f"Bearer {new_access}"
    # Google keeps the refresh token; the stored one is unchanged.
    assert crypto.decrypt(stored.refresh_token_encrypted) == crypto.decrypt(
        connection.refresh_token_encrypted
    )


def test_revoked_consent_marks_needs_reauth_and_stops_calling(
    fake_google, google_connection, caplog
):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    run_sync(connection.user_id)
    refresh_token = crypto.decrypt(connection.refresh_token_encrypted)
    fake_google.revoke_all()  # the next events call gets 401, the refresh invalid_grant

    with caplog.at_level(logging.INFO):
        summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert (summary.needs_reauth, summary.failed) == (1, 0)
    stored = reload(connection)
    assert stored.status == "needs_reauth"
    assert "invalid_grant" in stored.last_error
    assert refresh_token not in stored.last_error and refresh_token not in caplog.text
    assert len(events_of(connection)) == 1  # the copy stays; the sweep skips needs_reauth

    calls = len(fake_google.requests)
    later = run_sync(connection.user_id, NOW + timedelta(minutes=30))
    assert later.needs_reauth == 1 and later.provider_calls == 0  # not contacted again
    assert len(fake_google.requests) == calls


def test_each_run_requeries_the_moving_window_without_sync_tokens(fake_google, google_connection):
    fake_google.events["primary"] = [
        google_event("soon", T9, T9 + HOUR),
        google_event("later", T9 + 30 * HOUR, T9 + 31 * HOUR),  # beyond the first window
    ]
    connection = google_connection()

    run_sync(connection.user_id)
    assert [e.provider_event_id for e in events_of(connection)] == ["soon"]
    run_sync(connection.user_id, NOW + timedelta(hours=5))

    calls = fake_google.events_calls()
    assert len(calls) == 2
    assert all("syncToken" not in c.params and c.params["singleEvents"] == "true" for c in calls)
    assert calls[0].params["timeMin"] == "2026-12-02T07:45:00Z"
    assert calls[1].params["timeMax"] == "2026-12-03T16:00:00Z"
    # "soon" ended before the second window: deleted; "later" drifted in without changing.
    assert [e.provider_event_id for e in events_of(connection)] == ["later"]


def test_410_gone_keeps_the_copy_and_the_next_run_requeries_the_whole_window(
    fake_google, google_connection
):
    """No sync token is kept, so a 410 (Google's "full sync required") is just a failed
    run; every run already is a full query of the window."""
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    run_sync(connection.user_id)
    fake_google.next_answers = [Answer.json(410, {"error": {"code": 410, "message": "Gone"}})]

    failed = run_sync(connection.user_id, NOW + timedelta(minutes=15))
    assert failed.failed == 1 and len(events_of(connection)) == 1

    fake_google.events["primary"].append(google_event("b", T9 + HOUR, T9 + 2 * HOUR))
    recovered = run_sync(connection.user_id, NOW + timedelta(minutes=30))
    assert recovered.synced == 1
    assert [e.provider_event_id for e in events_of(connection)] == ["a", "b"]
    assert reload(connection).status == "active"


@pytest.mark.usefixtures("unpaced_providers")
def test_429_with_retry_after_backs_off_then_retries(fake_google, google_connection):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    fake_google.next_answers = [Answer.json(429, {"error": {"code": 429}}, ("Retry-After", "1200"))]

    first = run_sync(connection.user_id)
    assert first.failed == 1
    assert reload(connection).retry_after == NOW + timedelta(seconds=1200)

    waiting = run_sync(connection.user_id, NOW + timedelta(minutes=15))
    assert waiting.backing_off == 1 and waiting.provider_calls == 0

    retried = run_sync(connection.user_id, NOW + timedelta(minutes=30))
    assert retried.synced == 1
    stored = reload(connection)
    assert (stored.status, stored.retry_after, stored.last_error) == ("active", None, "")


@pytest.mark.parametrize(
    "answer",
    [
        Answer(503, b"<html>unavailable</html>", (("Content-Type", "text/html"),)),
        Answer.json(403, {"error": {"code": 403, "errors": [{"reason": "rateLimitExceeded"}]}}),
    ],
    ids=["503", "403-rate-limit"],
)
@pytest.mark.usefixtures("unpaced_providers")
def test_unavailable_or_rate_limited_retries_next_run(fake_google, google_connection, answer):
    connection = google_connection()
    fake_google.next_answers = [answer]

    run_sync(connection.user_id)

    stored = reload(connection)
    assert stored.status == "error"
    assert stored.retry_after == NOW + timedelta(minutes=5)
    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).synced == 1


@pytest.mark.parametrize(
    "answer",
    [
        Answer(200, b"{not json", (("Content-Type", "application/json"),)),
        Answer.json(200, {"items": {"not": "a list"}}),
        Answer.json(200, ["a", "list"]),
    ],
    ids=["not-json", "items-not-a-list", "not-an-object"],
)
def test_malformed_payload_keeps_the_previous_copy(fake_google, google_connection, answer):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()
    run_sync(connection.user_id)
    fake_google.next_answers = [answer]

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.failed == 1
    assert [e.provider_event_id for e in events_of(connection)] == ["a"]
    assert reload(connection).last_error.startswith("google: ")


def test_one_bad_event_is_skipped_and_the_rest_kept(fake_google, google_connection):
    fake_google.events["primary"] = [
        google_event("good", T9, T9 + HOUR),
        {**google_event("no-start", T9, T9 + HOUR), "start": {}},
        {
            **google_event("bad-minutes", T9, T9 + HOUR),
            "reminders": {"useDefault": False, "overrides": [{"method": "popup", "minutes": "x"}]},
        },
        {**google_event("bad-time", T9, T9 + HOUR), "start": {"dateTime": "tomorrow"}},
        {**google_event("x", T9, T9 + HOUR), "id": 42},
    ]
    connection = google_connection()

    summary = run_sync(connection.user_id)

    assert summary.synced == 1 and summary.events_skipped == 4
    assert [e.provider_event_id for e in events_of(connection)] == ["good"]


def test_pages_are_followed_and_counted(fake_google, google_connection, monkeypatch):
    monkeypatch.setattr(google_provider, "PAGE_SIZE", 2)
    fake_google.events["primary"] = [
        google_event(f"e{i}", T9 + i * HOUR, T9 + (i + 1) * HOUR) for i in range(5)
    ]
    connection = google_connection()

    summary = run_sync(connection.user_id)

    assert len(events_of(connection)) == 5
    assert summary.provider_calls == 3 == len(fake_google.events_calls())


def test_no_tenant_scope_is_open_during_provider_calls(fake_google, google_connection):
    connection = google_connection(token_expires_at=NOW - HOUR)  # a refresh, then events
    test_thread_connection = connections["default"]
    seen: list[object] = []
    original = fake_google.answer

    def spy(method, path, headers, body):
        seen.append(getattr(test_thread_connection, "_nudge_scope", None))
        return original(method, path, headers, body)

    fake_google.answer = spy
    run_sync(connection.user_id)

    assert seen == [None, None]


def test_a_cookie_set_in_one_tenants_answer_never_travels_with_anothers_request(
    fake_google, google_connection
):
    """Provider requests reuse the thread's connections (one session per thread),
    but keep no cookies: what Google sets answering one tenant's request is not
    sent with the next tenant's."""
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    first, second = google_connection(), google_connection()
    cookies_sent = []
    original = fake_google.answer

    def answer_setting_a_cookie(method, path, headers, body):
        cookies_sent.extend(v for k, v in headers.items() if k.lower() == "cookie")
        answer = original(method, path, headers, body)
        cookie = ("Set-Cookie", f"session=user-{first.user_id}; Path=/")
        return dataclasses.replace(answer, headers=(*answer.headers, cookie))

    fake_google.answer = answer_setting_a_cookie
    assert run_sync(first.user_id).synced == 1
    assert run_sync(second.user_id).synced == 1

    assert cookies_sent == []


def test_a_crash_writing_one_connection_does_not_stop_the_others(
    fake_google, google_connection, monkeypatch
):
    from calendars import sync as sync_module

    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    first = google_connection()
    google_connection(first.user)
    real_write = sync_module.tenant_statements
    calls = []

    def write_once_then_crash(user_id, statements, params, **options):
        calls.append(params["id"])
        if len(calls) == 1:
            raise RuntimeError("database went away")
        return real_write(user_id, statements, params, **options)

    monkeypatch.setattr(sync_module, "tenant_statements", write_once_then_crash)
    summary = run_sync(first.user_id)

    assert (summary.failed, summary.synced) == (1, 1)
    failed = [(r.connection_id, r.message) for r in summary.results if r.outcome == "failed"]
    assert failed == [(first.pk, "internal error (RuntimeError)")]


def test_a_401_before_expiry_refreshes_once_and_retries(fake_google, google_connection):
    fake_google.events["primary"] = [google_event("a", T9, T9 + HOUR)]
    connection = google_connection()  # our clock says the token is good for an hour
    fake_google.expire_access_tokens()  # Google disagrees

    summary = run_sync(connection.user_id)

    assert summary.synced == 1 and summary.provider_calls == 3  # 401, refresh, retry
    assert len(fake_google.token_calls()) == 1
    assert reload(connection).status == "active"
