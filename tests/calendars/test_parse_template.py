"""The parse template: one fresh child per feed, forked from a small warm process.

What the sweep relies on: feeds parsed at once from many threads each get their
own result; nothing one feed defines reaches the next; a hostile feed is killed
at its deadline and costs only itself; a template that dies or hangs is replaced; a
forked copy of the sweep starts its own; the template
ends with its parent and holds no database address or key.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from providers import parse_template
from providers.base import MalformedPayload
from providers.ics_parse import parse_feed
from providers.parse_template import parse_feed_bounded
from tests.calendars.conftest import NOW
from tests.calendars.ics_samples import FEED, SINGLE, crlf
from tests.calendars.test_hostile_feeds import never_matching
from tests.support.parse_template import template_pid

WINDOW = {"start": NOW, "end": NOW + timedelta(days=7), "timezone": "Europe/Berlin"}
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie awaiting its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children_of(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def wait_until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_feeds_parsed_at_once_from_many_threads_each_get_their_own_result():
    feeds = [FEED, SINGLE] * 40
    expected = {FEED: parse_feed(FEED, **WINDOW), SINGLE: parse_feed(SINGLE, **WINDOW)}

    with ThreadPoolExecutor(max_workers=64) as pool:
        results = list(pool.map(lambda body: parse_feed_bounded(body, **WINDOW), feeds))

    assert [result == expected[body] for body, result in zip(feeds, results, strict=True)] == [
        True
    ] * len(feeds)
    assert template_pid() is not None


def test_a_feeds_own_zone_definition_does_not_reach_the_next_feed():
    """icalendar caches a VTIMEZONE by its TZID: parsed in one process, a feed naming
    the TZID without defining it would take the previous tenant's definition."""

    def feed(uid: str, zone_definition: str) -> bytes:
        return crlf(
            f"""
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//tests//EN
{zone_definition}
BEGIN:VEVENT
UID:{uid}
DTSTART;TZID=Tenant Odd Zone:20261202T100000
DTEND;TZID=Tenant Odd Zone:20261202T110000
SUMMARY:Meeting
END:VEVENT
END:VCALENDAR
"""
        )

    defines = feed(
        "defines@example.com",
        "BEGIN:VTIMEZONE\nTZID:Tenant Odd Zone\nBEGIN:STANDARD\nDTSTART:19700101T000000\n"
        "TZOFFSETFROM:+0500\nTZOFFSETTO:+0500\nEND:STANDARD\nEND:VTIMEZONE",
    )
    names_only = feed("names@example.com", "")
    midnight = NOW.replace(hour=0)
    window = {"start": midnight, "end": midnight + timedelta(days=7)}

    alone = parse_feed_bounded(names_only, **window)
    [own] = parse_feed_bounded(defines, **window).events
    [after] = parse_feed_bounded(names_only, **window).events

    assert own.starts_at == midnight.replace(hour=5)  # 10:00 at +05:00, its own definition
    assert after.starts_at == alone.events[0].starts_at == midnight.replace(hour=10)


def test_a_hostile_feed_is_killed_at_its_deadline_and_the_template_survives():
    parse_feed_bounded(SINGLE, **WINDOW)
    template = template_pid()
    # Its child may burn 2 s of CPU (whole seconds, plus one), 1.3 s past the wall deadline.
    seconds = 0.2

    started = time.monotonic()
    with pytest.raises(MalformedPayload, match=r"took longer than 0s$"):
        parse_feed_bounded(never_matching(4), seconds=seconds, **WINDOW)
    elapsed = time.monotonic() - started

    assert elapsed < seconds + parse_template.WALL_GRACE_SECONDS + 1.0, elapsed
    # Killed at the deadline, not left to burn on to its CPU limit: gone at once.
    assert wait_until(lambda: children_of(template) == [], seconds=1.0)
    assert template_pid() == template
    assert parse_feed_bounded(SINGLE, **WINDOW) == parse_feed(SINGLE, **WINDOW)


def test_a_child_stopped_by_its_cpu_limit_is_reported_as_such(monkeypatch):
    """With the wall deadline out of the way, the child's RLIMIT_CPU ends it."""
    monkeypatch.setattr(parse_template, "WALL_GRACE_SECONDS", 120.0)

    with pytest.raises(MalformedPayload, match="took longer than 1s of CPU"):
        parse_feed_bounded(never_matching(4), seconds=1.0, **WINDOW)


def test_a_killed_template_is_replaced_and_the_next_feed_still_parses():
    for _ in range(3):
        parse_feed_bounded(SINGLE, **WINDOW)
        killed = template_pid()
        assert killed is not None
        os.kill(killed, signal.SIGKILL)  # not waited for: the next parse may meet it dying

        assert parse_feed_bounded(FEED, **WINDOW) == parse_feed(FEED, **WINDOW)
        assert template_pid() not in (None, killed)


def test_a_stuck_template_is_replaced_and_the_feed_is_not_blamed():
    """A template that no longer starts children (here: stopped) must not make every
    feed wait out its deadline and come back "took longer than"."""
    parse_feed_bounded(SINGLE, **WINDOW)
    stuck = template_pid()
    os.kill(stuck, signal.SIGSTOP)
    try:
        result = parse_feed_bounded(FEED, seconds=1.0, **WINDOW)

        assert result == parse_feed(FEED, **WINDOW)
        assert template_pid() not in (None, stuck)
        assert wait_until(lambda: not running(stuck))
    finally:
        if running(stuck):
            os.kill(stuck, signal.SIGKILL)


def _parse_in_fork(send) -> None:
    result = parse_feed_bounded(SINGLE, **WINDOW)
    send.send((template_pid(), result == parse_feed(SINGLE, **WINDOW)))


def test_a_forked_process_starts_its_own_template():
    """``materialize --workers`` forks the sweep; a fork must not talk to (or keep
    alive) its parent's template."""
    parse_feed_bounded(SINGLE, **WINDOW)
    parents = template_pid()
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_parse_in_fork, args=(send,))
    child.start()
    forks, parsed = receive.recv()
    child.join()

    assert parsed and forks not in (None, parents)
    assert wait_until(lambda: not running(forks))  # it ended with the fork
    assert template_pid() == parents
    assert parse_feed_bounded(SINGLE, **WINDOW) == parse_feed(SINGLE, **WINDOW)


def test_the_template_ends_with_its_parent():
    script = (
        "from datetime import datetime, timedelta, UTC\n"
        "from providers.parse_template import parse_feed_bounded\n"
        "from tests.support.parse_template import template_pid\n"
        "from tests.calendars.ics_samples import SINGLE\n"
        "now = datetime(2026, 12, 2, tzinfo=UTC)\n"
        "parse_feed_bounded(SINGLE, start=now, end=now + timedelta(days=1))\n"
        "print(template_pid(), flush=True)\n"
        "input()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    template = int(parent.stdout.readline())
    assert running(template)

    parent.kill()  # no atexit, no goodbye: only its sockets close
    parent.wait()

    assert wait_until(lambda: not running(template))


def test_the_template_knows_no_database_address_nor_keys(monkeypatch, request):
    """The template is exec'd, not forked from the sweep: nothing of the sweep's
    secrets (DATABASE_URL, token keys) in its environment or memory reaches a parse."""
    parse_template.stop_template()
    request.addfinalizer(parse_template.stop_template)  # later tests' starts as usual
    monkeypatch.setenv("DATABASE_URL", "postgres://nudge:secret@db.internal/nudge")
    monkeypatch.setenv("CALENDAR_TOKEN_KEYS", "a-key-of-ours")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    parse_feed_bounded(SINGLE, **WINDOW)
    template = template_pid()

    environment = dict(
        entry.split(b"=", 1)
        for entry in Path(f"/proc/{template}/environ").read_bytes().split(b"\0")
        if entry
    )

    assert environment[b"TZ"] == b"Europe/Berlin"  # what decides how zones read is passed
    passed = {name.encode() for name in parse_template.PASSED_ENVIRONMENT}
    assert set(environment) <= passed | {b"PYTHONPATH"}
    assert b"secret" not in b"".join(environment.values())


def test_what_the_parse_logs_reaches_the_service_log(caplog):
    caplog.set_level(logging.WARNING, logger="nudge.calendars.ics")
    no_uid = SINGLE.replace(b"UID:single@example.com\r\n", b"")

    [event] = parse_feed_bounded(no_uid, **WINDOW).events

    assert event.provider_event_id.startswith("nouid-")
    assert [r.getMessage() for r in caplog.records if r.name == "nudge.calendars.ics"] == [
        f"ics: {event.provider_event_id}: no UID; kept under an id derived from its start and title"
    ]
