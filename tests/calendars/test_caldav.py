"""CalDAV calendars against a real CalDAV server (Radicale) on 127.0.0.1.

Calendars and events are made through CalDAV itself; the code under test uses its real
HTTP path (the untrusted-fetch guard). Requests are counted at the server.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet

from calendars.caldav_connect import add_account, choices_of, choose_calendars, renew_password
from calendars.connect import ConnectError
from calendars.models import CalendarConnection, ConnectionStatus
from core.config import NudgeConfig
from providers.caldav import DavClient, discover, site_of
from providers.ics_parse import joined_calendar, parse_feed
from providers.untrusted_fetch import Deadline
from scheduled_sends.models import ScheduledSend
from sweeps.materialize import run_materialize
from sweeps.sync_changed import run_sync_changed
from tenancy.scope import tenant_scope
from tests.calendars.conftest import (
    NOW,
    events_of,
    make_connection,
    provider_snapshot,
    reload,
    run_sync,
)
from tests.calendars.ics_samples import FEED, SINGLE
from tests.calendars.test_real_world_feeds import (
    EDITED_ALARM,
    FLOATING,
    LEAD_ZERO,
    THIS_AND_FUTURE,
    feed,
    vevent,
)
from tests.fakes.caldav_server import RadicaleServer, Scripted

PASSWORD = "abcd-efgh-ijkl-mnop"


def objects_of(feed: bytes) -> dict[str, str]:
    """A feed as CalDAV stores it: one object per UID (a series with its overrides),
    each carrying the feed's time zones."""
    text = feed.decode().replace("\r\n", "\n")
    zones = "".join(re.findall(r"BEGIN:VTIMEZONE\n.*?END:VTIMEZONE\n", text, re.S))
    events: dict[str, list[str]] = defaultdict(list)
    for block in re.findall(r"BEGIN:VEVENT\n.*?\nEND:VEVENT\n", text, re.S):
        uid = re.search(r"^UID:(.*)$", block, re.M).group(1)
        events[uid].append(block)
    return {
        re.sub(r"\W", "-", uid): "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//tests//EN\n"
        + zones
        + "".join(blocks)
        + "END:VCALENDAR\n"
        for uid, blocks in events.items()
    }


@pytest.fixture
def radicale() -> Iterator[RadicaleServer]:
    with RadicaleServer() as server:
        server.add_user("ana", PASSWORD)
        server.calendar = server.make_calendar("ana", "work", "Work")
        yield server


@pytest.fixture
def caldav_connection(make_user, radicale) -> Callable[..., CalendarConnection]:
    def make(user=None, **fields: Any) -> CalendarConnection:
        return make_connection(
            user or make_user(),
            "caldav",
            account="ana",
            calendar_id=radicale.calendar,
            access_token=fields.pop("password", PASSWORD),
            feed_url=radicale.url + radicale.calendar,
            **{"allow_private_network": True, **fields},
        )

    return make


@pytest.fixture
def discovered_account(radicale) -> Callable[..., CalendarConnection]:
    """Ana's account added by its server's address, then discovered by the minute job."""

    def add(user) -> CalendarConnection:
        account = add_account(
            user.pk,
            preset="other",
            server_url=radicale.url + "/",
            username="ana",
            password=PASSWORD,
            config=NudgeConfig.from_settings(),
            allow_private=True,
        )
        run_sync_changed(NOW)  # the minute job's first fetch: discovery
        return account

    return add


def rows(connection: CalendarConnection) -> list[tuple]:
    return sorted(
        (e.provider_event_id, e.occurrence_start, e.starts_at, e.reminder_minutes, e.all_day)
        for e in events_of(connection)
    )


def test_discovery_finds_the_event_calendars_from_the_server_address(radicale):
    radicale.make_calendar("ana", "tasks", "Tasks", components="VTODO")
    radicale.make_calendar("ana", "home", "Home")
    config = NudgeConfig.from_settings()
    account = provider_snapshot(
        "caldav",
        config,
        account="ana",
        allow_private_network=True,
        access_token=PASSWORD,
        feed_url=radicale.url,
    )
    client = DavClient(account, Deadline(10))

    found = discover(client, radicale.url + "/")

    assert sorted((c["name"], c["url"]) for c in found) == [
        ("Home", radicale.url + "/ana/home/"),
        ("Work", radicale.url + "/ana/work/"),
    ]


def test_the_ics_suites_feed_gives_the_same_instants_and_leads(radicale, caldav_connection):
    # X-WR-TIMEZONE is a feed's header: a CalDAV object has none, so floating times are
    # the reader's; the feed read the same way must give the same rows.
    feed = FEED.replace(b"X-WR-TIMEZONE:Europe/Berlin\r\n", b"")
    for name, text in objects_of(feed).items():
        radicale.put_event(radicale.calendar, name, text)
    connection = caldav_connection()

    summary = run_sync(connection.user_id)

    assert summary.synced == 1 and summary.events_skipped == 0
    config = NudgeConfig.from_settings()
    start, end = config.subject_window(NOW)
    as_feed = parse_feed(feed, start=start, end=end + timedelta(days=6))
    assert rows(connection) == sorted(
        (e.provider_event_id, e.occurrence_start, e.starts_at, list(e.reminder_minutes), e.all_day)
        for e in as_feed.events
    )
    assert ("weekly@google.com", datetime(2026, 12, 2, 9, tzinfo=UTC)) in {
        (r[0], r[1]) for r in rows(connection)
    }
    assert reload(connection).sync_state["sync_token"]


def test_an_unchanged_calendar_costs_one_request(radicale, caldav_connection):
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    connection = caldav_connection()
    run_sync(connection.user_id)
    radicale.reset_counts()

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.unchanged == 1
    assert radicale.requests == [("REPORT", radicale.calendar)]


def test_a_change_at_the_server_is_seen_by_the_next_sync(radicale, caldav_connection):
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    connection = caldav_connection()
    run_sync(connection.user_id)
    radicale.put_event(radicale.calendar, "single", SINGLE.decode().replace("T100000Z", "T103000Z"))
    radicale.reset_counts()

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.synced == 1
    assert [e.starts_at for e in events_of(connection)] == [
        datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
    ]
    assert events_of(connection)[0].reminder_minutes == [10]
    assert radicale.count() == 2  # what changed, then the window re-read


def test_an_event_deleted_at_the_server_is_deleted_here(radicale, caldav_connection):
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    radicale.put_event(radicale.calendar, "other", SINGLE.decode().replace("single@", "other@"))
    connection = caldav_connection()
    run_sync(connection.user_id)
    assert len(events_of(connection)) == 2
    radicale.delete_event(radicale.calendar, "other")

    run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert [e.provider_event_id for e in events_of(connection)] == ["single@example.com"]


def test_a_server_that_lost_the_sync_token_is_read_again_once(radicale, caldav_connection):
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    connection = caldav_connection()
    run_sync(connection.user_id)
    radicale.lose_sync_tokens = True
    radicale.reset_counts()

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.synced == 1 and summary.failed == 0
    assert [m for m, _ in radicale.requests] == ["REPORT", "REPORT"]  # refused, then all
    assert len(events_of(connection)) == 1
    radicale.lose_sync_tokens = False
    radicale.reset_counts()
    assert run_sync(connection.user_id, NOW + timedelta(minutes=30)).unchanged == 1
    assert radicale.count() == 1


def test_a_refused_password_asks_for_it_again_and_is_never_logged(
    radicale, caldav_connection, caplog
):
    connection = caldav_connection(password="wrong-password-1234")
    caplog.set_level(logging.DEBUG)

    run_sync(connection.user_id)

    stored = reload(connection)
    assert stored.status == ConnectionStatus.NEEDS_REAUTH
    assert "needs your password again" in stored.last_error
    assert "wrong-password-1234" not in caplog.text + stored.last_error


def test_a_busy_server_is_left_alone_for_its_retry_after(radicale, caldav_connection):
    connection = caldav_connection()
    radicale.next_answers = [Scripted(503, b"", (("Retry-After", "120"),))]

    run_sync(connection.user_id)

    stored = reload(connection)
    assert stored.retry_after == NOW + timedelta(seconds=120)


def test_a_server_on_a_private_address_is_refused_without_the_allowance(
    radicale, caldav_connection
):
    connection = caldav_connection(allow_private_network=False)

    run_sync(connection.user_id)

    assert "private or local address" in reload(connection).last_error
    assert radicale.count() == 0


def test_objects_join_into_one_calendar_with_each_zone_once():
    objects = list(objects_of(FEED).values())

    joined = joined_calendar(objects).decode()

    assert joined.count("BEGIN:VTIMEZONE") == 1
    assert joined.count("BEGIN:VEVENT") == FEED.count(b"BEGIN:VEVENT")
    assert joined.count("VERSION:") == 1


def test_connect_by_discovery_then_choose_then_nudges_use_their_own_alarm_leads(
    radicale, make_user, discovered_account
):
    """The issue's acceptance, at the 300 ms the other providers' benchmarks use."""
    radicale.make_calendar("ana", "home", "Home")
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())  # a 10-minute VALARM
    radicale.latency = 0.3
    user = make_user(default_lead_minutes=5)
    config = NudgeConfig.from_settings()
    account = discovered_account(user)
    found = choices_of(reload(account))
    assert sorted(c["name"] for c in found) == ["Home", "Work"]
    work = next(c["url"] for c in found if c["name"] == "Work")
    chosen = choose_calendars(
        user.pk, account.pk, [work, "https://elsewhere.example/"], config=config
    )
    assert [c.pk for c in chosen] == [account.pk]
    run_sync(user.pk)
    run_materialize(NOW, sync_calendars=False)

    [event] = events_of(account)
    assert event.reminder_minutes == [10]
    with tenant_scope(user.pk):
        queued = list(
            ScheduledSend.objects.filter(user_id=user.pk).values_list("intended_at", flat=True)
        )
    assert queued == [datetime(2026, 12, 2, 9, 50, tzinfo=UTC)]
    assert reload(account).account == "ana" and PASSWORD not in str(reload(account).sync_state)
    radicale.reset_counts()
    assert run_sync(user.pk, NOW + timedelta(minutes=15)).unchanged == 1
    assert radicale.count() == 1  # an unchanged poll, counted at the server
    radicale.put_event(radicale.calendar, "single", SINGLE.decode().replace("Single", "Moved"))
    run_sync(user.pk, NOW + timedelta(minutes=30))
    assert [e.title for e in events_of(account)] == ["Moved"]


def test_choosing_several_calendars_keeps_to_the_cap(
    radicale, make_user, settings, discovered_account
):
    """One calendar under the cap, three chosen: refused with nothing added, and two
    (the most that fit) are taken."""
    settings.NUDGE_MAX_CALENDARS_PER_USER = 3
    radicale.make_calendar("ana", "home", "Home")
    radicale.make_calendar("ana", "gym", "Gym")
    user = make_user()
    make_connection(user, "ics", account="feed", feed_url="http://93.184.216.34/a.ics")
    config = NudgeConfig.from_settings()
    account = discovered_account(user)
    urls = [c["url"] for c in choices_of(reload(account))]
    assert len(urls) == 3

    with pytest.raises(ConnectError, match="choose at most 2 of these"):
        choose_calendars(user.pk, account.pk, urls, config=config)
    with tenant_scope(user.pk):
        assert CalendarConnection.objects.filter(user_id=user.pk).count() == 2

    assert len(choose_calendars(user.pk, account.pk, urls[:2], config=config)) == 2
    with tenant_scope(user.pk):
        assert CalendarConnection.objects.filter(user_id=user.pk).count() == 3


def test_a_new_password_makes_a_refused_calendar_active_again(radicale, caldav_connection):
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    connection = caldav_connection(password="revoked-password")
    run_sync(connection.user_id)
    assert reload(connection).status == ConnectionStatus.NEEDS_REAUTH

    renew_password(connection.user_id, connection.pk, PASSWORD)
    run_sync(connection.user_id)

    assert reload(connection).status == ConnectionStatus.ACTIVE
    assert len(events_of(connection)) == 1


REAL_WORLD = {
    "apple-and-thunderbird-lead-zero": LEAD_ZERO,
    "floating-times-and-floating-exdate": FLOATING,
    "this-and-future-edit": THIS_AND_FUTURE,
    "edited-occurrence-absolute-alarm": EDITED_ALARM,
    "icloud-declined-invitation": feed(
        vevent(
            "board@icloud.com",
            ":20261202T150000Z",
            "Board",
            'ATTENDEE;CN="Ann";EMAIL="ann@example.com";PARTSTAT=DECLINED:urn:uuid:7c0e0c2a',
            end=":20261202T160000Z",
        )
    ),
}


@pytest.mark.parametrize("case", sorted(REAL_WORLD))
def test_real_world_files_give_the_same_instants_through_caldav_as_through_ics(
    case, radicale, caldav_connection, fake_ics, ics_connection, make_user
):
    fake_ics.body = REAL_WORLD[case]
    for name, text in objects_of(REAL_WORLD[case]).items():
        radicale.put_event(radicale.calendar, name, text)
    user = make_user(timezone="Europe/Amsterdam")
    user.email = "ann@example.com"
    user.save(update_fields=["email"])
    by_ics, by_caldav = ics_connection(user), caldav_connection(user)

    summary = run_sync(user.pk)

    assert summary.synced == 2 and summary.failed == 0
    assert details(by_caldav) == details(by_ics) != []
    if case == "icloud-declined-invitation":
        assert details(by_caldav)[0][-1] is True  # recognised by the user's address


def details(connection: CalendarConnection) -> list[tuple]:
    return sorted(
        (e.provider_event_id, e.occurrence_start, e.starts_at, e.reminder_minutes, e.declined)
        for e in events_of(connection)
    )


def test_a_server_without_sync_collection_is_polled_by_its_ctag(radicale, caldav_connection):
    radicale.no_sync_collection = True
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    connection = caldav_connection()
    run_sync(connection.user_id)
    assert len(events_of(connection)) == 1
    assert reload(connection).sync_state["ctag"]
    radicale.reset_counts()

    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).unchanged == 1
    assert radicale.requests == [("PROPFIND", radicale.calendar)]
    radicale.put_event(radicale.calendar, "single", SINGLE.decode().replace("Single", "Moved"))
    run_sync(connection.user_id, NOW + timedelta(minutes=30))

    assert [e.title for e in events_of(connection)] == ["Moved"]
    assert "REPORT" in [m for m, _ in radicale.requests[1:]]


def test_a_calendar_over_the_size_cap_is_read_by_its_window(radicale, caldav_connection, settings):
    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    for year in range(2000, 2012):  # years of history the window does not need
        old = SINGLE.decode().replace("20261202", f"{year}1202").replace("single@", f"y{year}@")
        padded = old.replace("SUMMARY:Single", "SUMMARY:" + "Long ago " * 10)
        radicale.put_event(radicale.calendar, f"y{year}", padded)
    settings.ICS_MAX_BYTES = 2000
    connection = caldav_connection()

    summary = run_sync(connection.user_id)

    assert summary.synced == 1
    assert [e.provider_event_id for e in events_of(connection)] == ["single@example.com"]
    assert reload(connection).sync_state["windowed"] == "too_large"


def test_rotating_the_keys_keeps_the_app_password_working(radicale, caldav_connection, settings):
    from django.core.management import call_command

    radicale.put_event(radicale.calendar, "single", SINGLE.decode())
    connection = caldav_connection()
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode(), *settings.CALENDAR_TOKEN_KEYS]
    call_command("rotate_calendar_keys")
    settings.CALENDAR_TOKEN_KEYS = settings.CALENDAR_TOKEN_KEYS[:1]  # the old key removed

    assert run_sync(connection.user_id).synced == 1
    assert len(events_of(connection)) == 1


def test_the_password_goes_only_to_the_servers_own_site():
    icloud = site_of("https://caldav.icloud.com/")
    assert site_of("https://p12-caldav.icloud.com/123/calendars/") == icloud
    assert site_of("https://caldav.icloud.example/") != icloud
    assert site_of("http://caldav.icloud.com/") != icloud
    assert site_of("http://host.example:8080/a") == site_of("http://host.example:8080/b")
    assert site_of("http://host.example:8080/") != site_of("http://host.example:8081/")
