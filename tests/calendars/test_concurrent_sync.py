"""Many calendars at once: the sweep's sync pool against feed hosts on 127.0.0.1.

Each fake host answers after a fixed latency and counts the requests it is
answering at once, so the tests see what a provider sees: how many of our
requests overlap, and how many reach one host.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection

from calendars.sync_pool import SyncPool
from core.config import NudgeConfig
from providers.parse_template import parse_feed_bounded
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from sweeps.materialize import run_materialize
from tests.calendars.conftest import NOW, TEST_KEY, events_of, make_connection
from tests.calendars.ics_samples import SINGLE
from tests.fakes.ics_server import FakeIcsFeed
from tests.support.processes import manage, subprocess_env
from tests.sweeps.factories import rows


@pytest.fixture
def feed_hosts() -> Iterator[list[FakeIcsFeed]]:
    """Two feed hosts (two servers, each its own host:port), serving the same feed."""
    with FakeIcsFeed() as first, FakeIcsFeed() as second:
        for host in (first, second):
            host.body = SINGLE
        yield [first, second]


@pytest.fixture
def parse_template_running() -> None:
    """This process's parse template, started before a timed run: starting it (once per
    process, ~0.2 s, more on a loaded machine) is not what these tests time."""
    parse_feed_bounded(SINGLE, start=NOW, end=NOW + timedelta(days=1))


def feed_users(make_user, host: FakeIcsFeed, count: int) -> list:
    users = [make_user() for _ in range(count)]
    for user in users:
        make_connection(
            user, "ics", account="feed", feed_url=host.feed_url, allow_private_network=True
        )
    return users


@pytest.mark.usefixtures("parse_template_running")
def test_feeds_are_fetched_at_once_and_every_user_is_queued(make_user, settings, feed_hosts):
    settings.CALENDAR_SYNC_CONCURRENCY = 16
    settings.CALENDAR_SYNC_PER_HOST = 16
    host = feed_hosts[0]
    host.latency = 0.3
    users = feed_users(make_user, host, 12)

    started = time.monotonic()
    report = run_materialize(NOW)
    elapsed = time.monotonic() - started

    # Many in flight at once is the behaviour; the time only has to beat one at a time,
    # which is 12 x 0.3 s = 3.6 s of waiting alone (a loaded machine stretches the rest).
    assert host.max_in_flight >= 6
    assert elapsed < 3.6, elapsed
    assert (report.users, report.calendars_synced, report.queued) == (12, 12, 12)
    assert report.provider_calls == 12
    assert all(len(rows(user)) == 1 for user in users)


def test_a_cycles_slices_overlap_instead_of_draining_one_by_one(make_user, settings, feed_hosts):
    """The cron run takes the cycle a slice at a time, but the next slice's feeds are
    fetched while the last ones of the slice before are still out: the sync pool is
    never left to drain at a slice's end."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 3
    settings.CALENDAR_SYNC_CONCURRENCY = 16
    settings.CALENDAR_SYNC_PER_HOST = 16
    host = feed_hosts[0]
    host.latency = 0.3
    users = feed_users(make_user, host, 12)

    report = run_materialize(NOW)

    assert host.max_in_flight > 3, "each slice's feeds were fetched on their own"
    assert (report.users, report.calendars_synced, report.queued) == (12, 12, 12)
    assert report.slices_taken == report.cycle_slices_done == report.cycle_slices >= 4
    assert all(len(rows(user)) == 1 for user in users)


@pytest.mark.usefixtures("parse_template_running")
def test_one_slow_host_holds_at_most_its_cap_and_other_hosts_go_on(make_user, settings, feed_hosts):
    settings.CALENDAR_SYNC_CONCURRENCY = 4
    settings.CALENDAR_SYNC_PER_HOST = 2
    slow, fast = feed_hosts
    slow.latency, fast.latency = 1.0, 0.05
    slow_users = feed_users(make_user, slow, 4)  # added first: they would take every slot
    fast_users = feed_users(make_user, fast, 6)

    finished_at: dict[int, float] = {}
    started = time.monotonic()
    with SyncPool(now=NOW, config=NudgeConfig.from_settings()) as pool:
        for user in slow_users + fast_users:
            pool.add_user(user.pk)
        for user_id, summary in pool.drain():
            assert summary.synced == 1
            finished_at[user_id] = time.monotonic() - started

    assert slow.max_in_flight == 2 and fast.max_in_flight <= 2
    last_fast = max(finished_at[user.pk] for user in fast_users)
    first_slow = min(finished_at[user.pk] for user in slow_users)
    # Every fast feed is in while the slow host still holds its first two.
    assert last_fast < first_slow, (last_fast, first_slow)
    assert max(finished_at.values()) < 3.5  # two rounds of the slow host, not four
    for user in slow_users + fast_users:
        assert [e.provider_event_id for e in events_of_user(user)] == ["single@example.com"]


def events_of_user(user) -> list:
    from calendars.models import CalendarConnection
    from tenancy.scope import tenant_scope

    with tenant_scope(user.pk):
        connection = CalendarConnection.objects.get(user_id=user.pk)
    return events_of(connection)


def test_a_users_connections_go_one_after_another(make_user, settings, feed_hosts):
    """One tenant's many calendars take one slot, not many (and share the user's budget)."""
    settings.CALENDAR_SYNC_CONCURRENCY = 8
    host = feed_hosts[0]
    host.latency = 0.2
    user = make_user()
    for i in range(4):
        make_connection(
            user, "ics", account=f"feed{i}", feed_url=host.feed_url, allow_private_network=True
        )

    report = run_materialize(NOW)

    assert report.calendars_synced == 4 and host.max_in_flight == 1


@pytest.mark.parametrize(
    ("concurrency", "per_host", "problem"),
    [
        (0, 1, "CALENDAR_SYNC_CONCURRENCY must be between 1 and 512"),
        (513, 1, "CALENDAR_SYNC_CONCURRENCY must be between 1 and 512"),
        (8, 0, "CALENDAR_SYNC_PER_HOST must be at least 1"),
    ],
)
def test_the_sync_knobs_are_validated(settings, concurrency, per_host, problem):
    settings.CALENDAR_SYNC_CONCURRENCY = concurrency
    settings.CALENDAR_SYNC_PER_HOST = per_host
    with pytest.raises(ValueError, match=problem):
        NudgeConfig.from_settings()


def server_connections() -> int:
    """Connections to this database other than our own (lanes left open would show)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_database_lanes_queue_every_user_once_and_close_their_connections(
    make_user, settings, feed_hosts, monkeypatch
):
    """Issue 20, concurrent sync: the sweep's database work runs on
    CALENDAR_SYNC_DB_LANES threads of its own (here, committed rows, so they run);
    every user is synced and queued once, a second run queues nothing, and the
    lanes' connections are closed when the run ends."""
    settings.CALENDAR_SYNC_CONCURRENCY = 8
    settings.CALENDAR_SYNC_DB_LANES = 3
    feed_hosts[0].latency = 0.05
    users = feed_users(make_user, feed_hosts[0], 10)
    before = server_connections()
    inserts = []
    real_enqueue = transitions.enqueue_many

    def enqueue_noting_whose(rows):
        inserts.append(sorted({user_id for user_id, _, _ in rows}))
        return real_enqueue(rows)

    monkeypatch.setattr(transitions, "enqueue_many", enqueue_noting_whose)

    report = run_materialize(NOW)
    again = run_materialize(NOW + timedelta(minutes=15))  # the next cycle

    assert (report.users, report.calendars_synced, report.queued, report.ok) == (10, 10, 10, True)
    assert (again.queued, again.calendars_unchanged) == (0, 10)
    assert all(len(rows(user)) == 1 for user in users)
    # Planned and queued together once synced: one insert for the ten, none the next run.
    assert [users for users in inserts if users] == [sorted(user.pk for user in users)]
    assert server_connections() == before


@pytest.mark.django_db(transaction=True)
def test_a_user_whose_queueing_fails_keeps_the_calendar_just_synced(
    make_user, settings, feed_hosts, monkeypatch
):
    """Issue 20, concurrent sync: when a user's queueing fails, the synced copy is
    still stored, the user is counted failed, and the others planned with them are
    queued (each planned again alone)."""
    settings.CALENDAR_SYNC_CONCURRENCY = 4
    settings.CALENDAR_SYNC_DB_LANES = 2
    good, bad = feed_users(make_user, feed_hosts[0], 2)
    real_enqueue = transitions.enqueue_many

    def enqueue_failing_for_bad(rows):
        if any(user_id == bad.pk for user_id, _, _ in rows):
            raise RuntimeError("queue table unavailable")
        return real_enqueue(rows)

    monkeypatch.setattr(transitions, "enqueue_many", enqueue_failing_for_bad)

    report = run_materialize(NOW)

    assert (report.calendars_synced, report.queued, report.failed_users) == (2, 1, 1)
    assert [e.provider_event_id for e in events_of_user(bad)] == ["single@example.com"]
    assert len(rows(good)) == 1 and rows(bad) == []


@pytest.mark.django_db(transaction=True)
def test_two_processes_on_one_cron_line_sync_feeds_each_parsed_in_its_own_child(
    make_user, feed_hosts
):
    """Two ``materialize`` processes started at once (what ``--workers 2`` was) share
    the cycle's users and sync their feeds: each process starts the child a feed is
    parsed in, and each holds its own per-host cap, so the host sees at most both."""
    feed_hosts[0].latency = 0.05
    users = feed_users(make_user, feed_hosts[0], 8)
    env = subprocess_env(
        CALENDAR_TOKEN_KEYS=TEST_KEY,  # the key the feeds' addresses were stored under
        CALENDAR_SYNC_CONCURRENCY="2",
        CALENDAR_SYNC_PER_HOST="2",
        NUDGE_MATERIALIZE_SLICE_USERS="2",
    )
    processes = [manage("materialize", "--now", NOW.isoformat(), env=env) for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]

    assert [process.returncode for process in processes] == [0, 0], outputs
    runs = SweepRun.objects.filter(sweep="materialize", status="ok")
    assert sum(run.counts["users"] for run in runs) == 8
    synced = [(run.counts["calendars_synced"], run.counts["calendar_outcomes"]) for run in runs]
    assert sum(n for n, _ in synced) == 8, synced
    assert all(len(rows(user)) == 1 for user in users)
    assert feed_hosts[0].max_in_flight <= 4
