"""ICS feeds: the real fetch/parse code against a feed served on 127.0.0.1."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

import pytest

from providers import ics as ics_provider
from providers.base import ProviderError
from tests.calendars.conftest import NOW, events_of, reload, run_sync
from tests.calendars.ics_samples import FEED, SINGLE, crlf, runaway
from tests.fakes.base import Answer


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_google_style_feed_is_expanded_and_normalised(fake_ics, ics_connection):
    fake_ics.body = FEED
    connection = ics_connection(account="someone@example.com")

    summary = run_sync(connection.user_id)

    assert summary.synced == 1 and summary.events_skipped == 0
    rows = [
        (e.provider_event_id, e.occurrence_start, e.starts_at, e.reminder_minutes, e.all_day)
        for e in events_of(connection)
    ]
    daily = "daily@google.com"
    assert rows == [
        ("weekly@google.com", utc(2026, 12, 2, 9), utc(2026, 12, 2, 9), [30], False),
        ("fixed@example.com", None, utc(2026, 12, 2, 12), [], False),  # +03:00 zone, no TZNAME
        ("declined@example.com", None, utc(2026, 12, 2, 13), [], False),
        (daily, utc(2026, 12, 2, 14), utc(2026, 12, 2, 14), [15], False),  # END-75m of a 1h event
        ("ny@example.com", None, utc(2026, 12, 2, 14), [15], False),  # absolute trigger
        ("floating@example.com", None, utc(2026, 12, 2, 17), [], False),  # X-WR-TIMEZONE
        ("allday@example.com", None, utc(2026, 12, 2, 23), [], True),  # Berlin midnight
        # 12-03 is an EXDATE; 12-04 moved from 14:00 to 16:00; 12-05 cancelled.
        (daily, utc(2026, 12, 4, 14), utc(2026, 12, 4, 16), [], False),
        (daily, utc(2026, 12, 6, 14), utc(2026, 12, 6, 14), [15], False),
        (daily, utc(2026, 12, 7, 14), utc(2026, 12, 7, 14), [15], False),
        (daily, utc(2026, 12, 8, 14), utc(2026, 12, 8, 14), [15], False),
        # The weekly's 12-09 occurrence is an EXDATE.
    ]
    declined = next(e for e in events_of(connection) if e.provider_event_id.startswith("declined"))
    assert declined.declined


def test_304_costs_no_parse_and_no_writes(fake_ics, ics_connection, monkeypatch):
    fake_ics.body = FEED
    connection = ics_connection()
    run_sync(connection.user_id)
    before = [(e.pk, e.updated_at) for e in events_of(connection)]

    def must_not_parse(*args, **kwargs):
        raise AssertionError("a 304 must not be parsed")

    # The provider's call: the parse itself runs in another process, out of a patch's reach.
    monkeypatch.setattr(ics_provider, "parse_feed_bounded", must_not_parse)
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.unchanged == 1 and summary.provider_calls == 1
    assert fake_ics.not_modified == 1
    assert fake_ics.feed_calls()[-1].headers["If-None-Match"] == fake_ics.etag
    assert "If-Modified-Since" in fake_ics.feed_calls()[-1].headers
    assert [(e.pk, e.updated_at) for e in events_of(connection)] == before
    assert (summary.events_created, summary.events_updated, summary.events_deleted) == (0, 0, 0)


def test_same_body_without_validators_is_not_parsed_either(fake_ics, ics_connection, monkeypatch):
    fake_ics.etags = False
    fake_ics.body = FEED
    connection = ics_connection()
    run_sync(connection.user_id)
    monkeypatch.setattr(ics_provider, "parse_feed_bounded", lambda *a, **k: pytest.fail("parsed"))

    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).unchanged == 1


def test_a_changed_feed_is_reparsed_and_a_moved_event_keeps_its_row(fake_ics, ics_connection):
    fake_ics.body = SINGLE
    connection = ics_connection()
    run_sync(connection.user_id)
    [before] = events_of(connection)

    fake_ics.body = SINGLE.replace(b"T100000Z", b"T120000Z").replace(b"T110000Z", b"T130000Z")
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    [after] = events_of(connection)
    assert summary.synced == 1 and after.pk == before.pk
    assert after.starts_at == utc(2026, 12, 2, 12)


def test_when_the_window_outruns_the_expansion_the_feed_is_fetched_in_full(
    fake_ics, ics_connection
):
    fake_ics.body = FEED
    connection = ics_connection()
    run_sync(connection.user_id)
    expanded_until = datetime.fromisoformat(reload(connection).sync_state["expanded_until"])
    assert expanded_until == utc(2026, 12, 9, 11)

    run_sync(connection.user_id, NOW + timedelta(days=5))  # still covered: 304
    assert (fake_ics.full_responses, fake_ics.not_modified) == (1, 1)
    run_sync(connection.user_id, NOW + timedelta(days=6, hours=1))  # not covered: full GET
    assert (fake_ics.full_responses, fake_ics.not_modified) == (2, 1)
    assert "If-None-Match" not in fake_ics.feed_calls()[-1].headers


def test_resync_requested_forces_a_full_fetch(fake_ics, ics_connection):
    fake_ics.body = FEED
    connection = ics_connection()
    run_sync(connection.user_id)
    with_scope_update(connection, resync_requested=True)

    run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert fake_ics.full_responses == 2 and fake_ics.not_modified == 0
    assert reload(connection).resync_requested is False


def with_scope_update(connection, **fields) -> None:
    from calendars.models import CalendarConnection
    from tenancy.scope import tenant_scope

    with tenant_scope(connection.user_id):
        CalendarConnection.objects.filter(pk=connection.pk).update(**fields)


def test_429_with_retry_after(fake_ics, ics_connection):
    fake_ics.body = SINGLE
    connection = ics_connection()
    fake_ics.next_answers = [Answer(429, b"slow down", (("Retry-After", "900"),))]

    assert run_sync(connection.user_id).failed == 1
    assert reload(connection).retry_after == NOW + timedelta(seconds=900)
    assert run_sync(connection.user_id, NOW + timedelta(minutes=10)).backing_off == 1
    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).synced == 1


def test_redirects_are_followed_and_counted(fake_ics, ics_connection):
    fake_ics.body = SINGLE
    connection = ics_connection()
    fake_ics.next_answers = [Answer(302, b"", (("Location", fake_ics.feed_path),))]

    summary = run_sync(connection.user_id)

    assert summary.synced == 1 and summary.provider_calls == 2


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>Please sign in</body></html>",
        b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:garbage\r\n",
        b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\nEND:VCALENDAR\r\n",
    ],
    ids=["html", "truncated", "mismatched"],
)
def test_malformed_feed_is_rejected_and_the_copy_kept(fake_ics, ics_connection, body, caplog):
    fake_ics.body = SINGLE
    connection = ics_connection()
    run_sync(connection.user_id)
    fake_ics.body = body

    with caplog.at_level(logging.INFO):
        summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.failed == 1
    assert [e.provider_event_id for e in events_of(connection)] == ["single@example.com"]
    stored = reload(connection)
    assert stored.status == "error" and stored.last_error.startswith("ics: ")
    assert fake_ics.secret not in stored.last_error and fake_ics.secret not in caplog.text


def test_oversized_feed_is_refused_by_its_declared_length(fake_ics, ics_connection, settings):
    settings.ICS_MAX_BYTES = 1000
    fake_ics.body = SINGLE + b" " * 2000
    connection = ics_connection()

    run_sync(connection.user_id)

    assert "larger than 1000 bytes" in reload(connection).last_error


def test_a_compressed_feed_is_bounded_after_decompression(fake_ics, ics_connection, settings):
    settings.ICS_MAX_BYTES = 200_000
    fake_ics.gzip_body = True
    fake_ics.body = SINGLE.replace(b"SUMMARY:Single", b"SUMMARY:" + b"x" * 5_000_000)
    connection = ics_connection()

    run_sync(connection.user_id)

    assert "larger than 200000 bytes" in reload(connection).last_error


@pytest.mark.parametrize(
    ("rule", "dtstart"),
    [
        ("FREQ=SECONDLY", "20200101T000000Z"),
        ("FREQ=SECONDLY", "20261202T080000Z"),
        ("FREQ=MINUTELY;INTERVAL=1", "20250101T000000Z"),
        (
            "FREQ=DAILY;BYHOUR=0,1,2,3,4,5,6,7,8,9,10,11;BYMINUTE=0,10,20,30,40,50",
            "20100101T000000Z",
        ),
    ],
    ids=["secondly-since-2020", "secondly-from-now", "minutely-since-2025", "daily-by-parts"],
)
def test_unbounded_recurrences_are_refused_quickly(fake_ics, ics_connection, rule, dtstart):
    fake_ics.body = SINGLE
    connection = ics_connection()
    run_sync(connection.user_id)
    fake_ics.body = runaway(rule, dtstart)

    started = time.monotonic()
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert time.monotonic() - started < 3
    assert summary.failed == 1
    assert "recurrence" in reload(connection).last_error
    assert [e.provider_event_id for e in events_of(connection)] == ["single@example.com"]


def test_a_bounded_frequent_recurrence_is_fine(fake_ics, ics_connection):
    fake_ics.body = runaway("FREQ=HOURLY;COUNT=5", "20261202T090000Z")
    connection = ics_connection()

    assert run_sync(connection.user_id).synced == 1
    assert len(events_of(connection)) == 5


def test_private_addresses_are_refused_unless_allowed(fake_ics, ics_connection):
    fake_ics.body = SINGLE
    connection = ics_connection(allow_private_network=False)

    summary = run_sync(connection.user_id)

    assert summary.failed == 1
    assert "private or local address" in reload(connection).last_error
    assert fake_ics.feed_calls() == []


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/feed.ics", "file:///etc/passwd", "http://127.0.0.1/x", "http://[::1]/x"],
)
def test_feed_url_check(url):
    with pytest.raises(ProviderError):
        ics_provider.check_feed_url(url, allow_private=False)


def test_feed_url_check_allows_private_only_when_asked():
    ics_provider.check_feed_url("http://127.0.0.1:8000/x.ics", allow_private=True)
    with pytest.raises(ProviderError):
        ics_provider.check_feed_url("ftp://127.0.0.1/x.ics", allow_private=True)


@pytest.mark.parametrize("status", [404, 410, 401])
def test_a_feed_address_that_stopped_working_needs_the_user(fake_ics, ics_connection, status):
    fake_ics.body = SINGLE
    connection = ics_connection()
    run_sync(connection.user_id)
    fake_ics.next_answers = [Answer(status, b"Not Found")]

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.needs_reauth == 1
    stored = reload(connection)
    assert stored.status == "needs_reauth" and fake_ics.secret not in stored.last_error


def test_debug_logging_does_not_leak_the_feed_address(fake_ics, ics_connection, caplog):
    fake_ics.body = SINGLE
    connection = ics_connection()

    with caplog.at_level(logging.DEBUG):
        run_sync(connection.user_id)
        fake_ics.next_answers = [Answer(500, b"boom")]
        run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert caplog.records and fake_ics.secret not in caplog.text


def floating_until_series(until: str) -> bytes:
    """A daily meeting at 10:00 in New York whose UNTIL is written without a zone."""
    return crlf(
        f"""
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//hand written//EN
BEGIN:VEVENT
UID:standup@example.com
DTSTART;TZID=America/New_York:20261201T100000
DTEND;TZID=America/New_York:20261201T103000
RRULE:FREQ=DAILY;UNTIL={until}
SUMMARY:Standup
END:VEVENT
END:VCALENDAR
"""
    )


@pytest.mark.parametrize("reader_zone", ["", "Asia/Tokyo"])  # the reader's zone plays no part
def test_a_floating_until_is_read_in_the_series_zone_and_keeps_the_last_occurrence(
    fake_ics, ics_connection, make_user, reader_zone
):
    """UNTIL 20261203T100000 means 10:00 in New York (15:00Z), the last occurrence's own
    start; read as UTC it ends the series five hours before it."""
    user = make_user(timezone=reader_zone or "UTC")
    fake_ics.body = floating_until_series("20261203T100000")
    connection = ics_connection(user)

    assert run_sync(connection.user_id).synced == 1

    starts = [e.starts_at for e in events_of(connection)]
    assert starts == [utc(2026, 12, 2, 15), utc(2026, 12, 3, 15)]


def test_an_until_in_utc_still_means_utc(fake_ics, ics_connection):
    fake_ics.body = floating_until_series("20261203T100000Z")  # before 15:00Z: no 12-03
    connection = ics_connection()

    run_sync(connection.user_id)

    assert [e.starts_at for e in events_of(connection)] == [utc(2026, 12, 2, 15)]
