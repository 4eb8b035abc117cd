"""A feed is the one input a tenant fully controls: it must not steer the fetch
inside our network, stall a sweep, or burn its CPU (issue: hostile feeds).

Each test reproduces a finding against the real fetch and parse code: the
parser differential (a backslash before ``@``), DNS rebinding (a resolver stub
whose answer changes), NAT64 and other special-purpose ranges, a host that
drips one byte at a time, recurrence rules that can never match, and a
connection that outlives its budget while the user's other nudges are queued.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model

from providers import ics, untrusted_fetch
from providers.base import ProviderError
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.calendars.conftest import NOW, events_of, make_connection, reload, run_sync
from tests.calendars.ics_samples import SINGLE, crlf
from tests.fakes.ics_server import FakeIcsFeed
from tests.sweeps.factories import add_follow_up, rows

_real_getaddrinfo = socket.getaddrinfo


@pytest.fixture
def resolver(monkeypatch) -> dict[str, list[str]]:
    """A DNS stub: names in the dict resolve to their list of answers, one per lookup
    (the last one repeats); every other name resolves as usual."""
    answers: dict[str, list[str]] = {}
    lookups: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            lookups.append(host)
            queue = answers[host]
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port or 80))]
        return _real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    answers["__lookups__"] = lookups  # type: ignore[assignment]
    return answers


# --- steering the fetch --------------------------------------------------------------


def test_a_backslash_cannot_make_the_guard_and_the_client_disagree(fake_ics, make_user, resolver):
    # urlsplit reads the host as public.example (vetted: public); the HTTP client
    # reads 127.0.0.1 — before, the request went to the loopback service.
    resolver["public.example"] = ["8.8.8.8"]
    port = fake_ics.url.rsplit(":", 1)[1]
    crafted = f"http://127.0.0.1:{port}\\@public.example{fake_ics.feed_path}"
    fake_ics.body = SINGLE
    connection = make_connection(
        make_user(), "ics", account="feed", feed_url=crafted, allow_private_network=False
    )

    summary = run_sync(connection.user_id)

    assert summary.failed == 1 and fake_ics.feed_calls() == []
    assert "backslash" in reload(connection).last_error


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pass@feeds.example.com/x.ics",
        "http://feeds.example.com\t/x.ics",
        "http://feeds.example.com/x.ics\r\nX-Injected: 1",
    ],
    ids=["userinfo", "tab", "crlf"],
)
def test_addresses_meant_to_confuse_parsers_are_refused(url):
    with pytest.raises(untrusted_fetch.UnsafeAddress):
        ics.check_feed_url(url, allow_private=False)


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b:1::a00:1",  # local-use NAT64 of 10.0.0.1
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "::ffff:169.254.169.254",  # IPv4-mapped metadata service
        "224.0.0.1",  # multicast
        "100.64.0.1",  # shared address space
        "169.254.169.254",
    ],
)
def test_special_purpose_ranges_are_refused(resolver, address):
    resolver["feeds.example.com"] = [address]
    with pytest.raises(untrusted_fetch.UnsafeAddress, match="private or local"):
        ics.check_feed_url("https://feeds.example.com/x.ics", allow_private=False)
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(untrusted_fetch.UnsafeAddress):
        ics.check_feed_url(f"https://{host}/x.ics", allow_private=False)


def test_a_name_that_rebinds_after_the_check_is_not_followed(
    fake_ics, make_user, resolver, monkeypatch
):
    # First answer public (vetted), every later one the loopback service. Before, the
    # client resolved again and connected to 127.0.0.1.
    resolver["rebind.example"] = ["8.8.8.8", "127.0.0.1"]
    connected: list[str] = []

    def create_connection(address, *args, **kwargs):
        connected.append(address[0])
        raise ConnectionRefusedError("the test does not leave this machine")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    port = fake_ics.url.rsplit(":", 1)[1]
    fake_ics.body = SINGLE
    connection = make_connection(
        make_user(),
        "ics",
        account="feed",
        feed_url=f"http://rebind.example:{port}{fake_ics.feed_path}",
        allow_private_network=False,
    )

    summary = run_sync(connection.user_id)

    assert fake_ics.feed_calls() == []  # the loopback service never saw a request
    assert connected == ["8.8.8.8"] and resolver["__lookups__"] == ["rebind.example"]
    assert summary.failed == 1


# --- stalling the fetch --------------------------------------------------------------


@contextmanager
def drip_server(seconds: float = 20.0, every: float = 0.25) -> Iterator[str]:
    """An HTTP server that answers 200 and then sends one byte every ``every`` seconds
    for ``seconds`` — each byte restarts a read timeout, so only a deadline stops it."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                peer, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=drip, args=(peer,), daemon=True).start()

    def drip(peer: socket.socket) -> None:
        with peer:
            peer.recv(65536)
            peer.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/calendar\r\n\r\nBEGIN:VCALENDAR\r\n"
            )
            ends = time.monotonic() + seconds
            while time.monotonic() < ends and not stop.is_set():
                try:
                    peer.sendall(b"X")
                except OSError:
                    return
                time.sleep(every)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/feed.ics"
    finally:
        stop.set()
        thread.join(2)
        listener.close()


def test_a_dripping_host_is_cut_at_the_deadline(make_user, monkeypatch):
    monkeypatch.setattr(ics, "DOWNLOAD_SECONDS", 2.0)
    with drip_server() as url:
        connection = make_connection(
            make_user(), "ics", account="drip", feed_url=url, allow_private_network=True
        )
        started = time.monotonic()
        summary = run_sync(connection.user_id)
        elapsed = time.monotonic() - started

    assert summary.failed == 1 and elapsed < 5, elapsed
    stored = reload(connection)
    assert "took longer than 2s" in stored.last_error
    assert stored.retry_after == NOW + timedelta(hours=1)  # left alone for an hour


def test_a_connection_over_its_budget_is_abandoned_and_the_user_still_queued(
    make_user, settings, fake_ics
):
    settings.CALENDAR_SYNC_BUDGET_SECONDS = 1.5
    user = make_user()
    follow_up = add_follow_up(user, NOW + timedelta(hours=1))
    fake_ics.body = SINGLE
    good = make_connection(
        user, "ics", account="good", feed_url=fake_ics.feed_url, allow_private_network=True
    )
    with drip_server() as url:
        slow = make_connection(
            user, "ics", account="slow", feed_url=url, allow_private_network=True
        )
        started = time.monotonic()
        report = run_materialize(NOW)
        elapsed = time.monotonic() - started

    assert elapsed < 6, elapsed
    assert "took longer than" in reload(slow).last_error
    assert reload(good).status == "active" and len(events_of(good)) == 1
    assert (report.calendars_failed, report.calendars_synced) == (1, 1)
    queued = {(r.kind, r.ref_id) for r in rows(user)}
    assert ("follow_up", follow_up.pk) in queued and len(queued) == 2


def test_a_users_many_slow_calendars_share_one_budget_and_take_turns(make_user, settings, fake_ics):
    settings.CALENDAR_SYNC_BUDGET_SECONDS = 1.0
    settings.CALENDAR_SYNC_USER_BUDGET_SECONDS = 1.5
    user = make_user()
    follow_up = add_follow_up(user, NOW + timedelta(hours=1))
    with drip_server() as url:
        slow = [
            make_connection(
                user, "ics", account=f"slow{i}", feed_url=url, allow_private_network=True
            )
            for i in range(4)
        ]
        started = time.monotonic()
        report = run_materialize(NOW)
        elapsed = time.monotonic() - started

    # Two connections spend the user's budget; the other two wait for the next run.
    assert elapsed < 5, elapsed
    assert (report.calendars_failed, report.calendars_deferred) == (2, 2)
    assert ("follow_up", follow_up.pk) in {(r.kind, r.ref_id) for r in rows(user)}

    tried = {c.pk for c in slow if reload(c).last_error}
    assert len(tried) == 2
    # Next run: the two abandoned ones back off for an hour; the deferred two get their turn.
    again = run_materialize(NOW + timedelta(minutes=15))
    assert (again.calendars_failed, again.calendars_deferred) == (2, 0)
    assert all(reload(c).last_error for c in slow)


# --- burning CPU -----------------------------------------------------------------------


def never_matching(count: int) -> bytes:
    """Rules that can never match: dateutil walks each to the year 9999 (seconds each)."""
    events = "".join(
        f"BEGIN:VEVENT\nUID:never-{i}@example.com\nDTSTART:20261130T090000Z\n"
        f"RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY={30 + i % 2}\nSUMMARY:Never\nEND:VEVENT\n"
        for i in range(count)
    )
    return crlf(f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//x//EN\n{events}END:VCALENDAR")


def test_rules_that_never_match_cannot_burn_the_sweep(fake_ics, ics_connection):
    fake_ics.body = SINGLE
    connection = ics_connection()
    run_sync(connection.user_id)
    fake_ics.body = never_matching(4)

    started = time.monotonic()
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))
    elapsed = time.monotonic() - started

    assert summary.failed == 1 and elapsed < 6, elapsed
    assert "took longer than" in reload(connection).last_error
    assert [e.provider_event_id for e in events_of(connection)] == ["single@example.com"]


def test_the_bounded_parse_returns_what_the_parse_returns():
    from providers.ics_parse import parse_feed
    from providers.parse_template import parse_feed_bounded
    from tests.calendars.ics_samples import FEED

    window = {"start": NOW, "end": NOW + timedelta(days=7), "timezone": "Europe/Berlin"}
    assert parse_feed_bounded(FEED, **window) == parse_feed(FEED, **window)


def test_a_parse_error_comes_back_from_the_child():
    from providers.parse_template import parse_feed_bounded

    with pytest.raises(ProviderError, match="not an iCalendar feed"):
        parse_feed_bounded(b"<html></html>", start=NOW, end=NOW + timedelta(days=1))


def test_fake_ics_server_is_still_reachable_directly():
    with FakeIcsFeed() as feed:
        feed.body = SINGLE
        deadline = untrusted_fetch.Deadline(5)
        with untrusted_fetch.follow(
            feed.feed_url,
            lambda _url: {},
            allow_private=True,
            deadline=deadline,
            timeout=5,
            label="ics",
        ) as (answer, _url):
            assert answer.status == 200
            assert b"".join(answer.stream(1024)) == SINGLE
        deadline.cancel()


def test_an_ipv6_literal_address_is_fetched_pinned_with_its_host_header():
    class Feed(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            hosts.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", str(len(SINGLE)))
            self.end_headers()
            self.wfile.write(SINGLE)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    hosts: list[str] = []
    with Server(("::1", 0), Feed) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://[::1]:{server.server_address[1]}/x.ics"
        deadline = untrusted_fetch.Deadline(5)
        try:
            with untrusted_fetch.follow(
                url, lambda _url: {}, allow_private=True, deadline=deadline, timeout=5, label="ics"
            ) as (answer, _url):
                assert answer.status == 200
                assert b"".join(answer.stream(1024)) == SINGLE
        finally:
            deadline.cancel()
            server.shutdown()
    assert hosts == [f"[::1]:{server.server_address[1]}"]


def test_two_hostile_feeds_among_four_users_cost_one_run_seconds(make_user, settings, monkeypatch):
    """A drip feed and a never-matching feed among four users: one materialize finishes
    quickly, every user's follow-up is queued (the offenders' too), and the two
    offending connections are reported."""
    monkeypatch.setattr(ics, "DOWNLOAD_SECONDS", 2.0)
    users = [make_user() for _ in range(4)]
    follow_ups = [add_follow_up(user, NOW + timedelta(hours=1)) for user in users]
    with FakeIcsFeed() as good, FakeIcsFeed() as never, drip_server() as drip:
        good.body, never.body = SINGLE, never_matching(6)
        feeds = [drip, never.feed_url, good.feed_url, good.feed_url]
        connections = [
            make_connection(user, "ics", account="feed", feed_url=url, allow_private_network=True)
            for user, url in zip(users, feeds, strict=True)
        ]
        started = time.monotonic()
        report = run_materialize(NOW)
        elapsed = time.monotonic() - started

    assert elapsed < 15, elapsed
    assert (report.calendars_failed, report.calendars_synced, report.failed_users) == (2, 2, 0)
    for user, follow_up in zip(users, follow_ups, strict=True):
        assert ("follow_up", follow_up.pk) in {(r.kind, r.ref_id) for r in rows(user)}
    assert [reload(c).status for c in connections] == ["error", "error", "active", "active"]


def display_alarms(count: int) -> str:
    """``count`` display alarms, 1 to ``count`` minutes before the start."""
    return "".join(
        f"BEGIN:VALARM\nACTION:DISPLAY\nTRIGGER:-PT{minutes}M\nEND:VALARM\n"
        for minutes in range(1, count + 1)
    )


def test_a_flood_of_reminders_is_capped_per_event_and_reported(fake_ics, ics_connection):
    # 180 display alarms on one event: before, 180 queued nudges per occurrence.
    alarms = display_alarms(180)
    fake_ics.body = crlf(
        "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//x//EN\nBEGIN:VEVENT\nUID:flood@example.com\n"
        f"DTSTART:20261202T100000Z\nRRULE:FREQ=HOURLY;COUNT=3\nSUMMARY:Flood\n{alarms}"
        "END:VEVENT\nEND:VCALENDAR"
    )
    connection = ics_connection()

    assert run_sync(connection.user_id).synced == 1

    assert {tuple(e.reminder_minutes) for e in events_of(connection)} == {(1, 2, 3, 4, 5)}
    stored = reload(connection)
    assert stored.status == "active"
    assert "flood@example.com: 180 reminders; the 5 nearest the start kept" in stored.last_error


def test_a_flooding_feed_cannot_hold_back_other_tenants_nudges(
    fake_ics, ics_connection, make_user, recording_channel
):
    """The reported shape: minutely events, each with 180 alarms, in one tenant's feed."""
    alarms = display_alarms(180)
    fake_ics.body = crlf(
        "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//x//EN\nBEGIN:VEVENT\nUID:minutely@example.com\n"
        f"DTSTART:20261202T080000Z\nRRULE:FREQ=MINUTELY;COUNT=600\nSUMMARY:Flood\n{alarms}"
        "END:VEVENT\nEND:VCALENDAR"
    )
    flooder = ics_connection().user_id
    others = [make_user() for _ in range(10)]
    due = NOW + timedelta(minutes=20)
    for user in others:
        add_follow_up(user, due)

    report = run_materialize(NOW)
    flooded = rows(get_user_model().objects.get(pk=flooder))
    assert len(flooded) <= 200  # NUDGE_MAX_NUDGES_PER_USER, not tens of thousands
    assert report.capped_users == 1 and report.capped_nudges > 500

    # When the others' minute comes, one deliver run sends every one of them.
    sent = run_deliver(due - timedelta(minutes=10))
    assert all(rows(user)[0].outcome == "sent" for user in others), sent.summary()
