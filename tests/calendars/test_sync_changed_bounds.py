"""The push minute job under load: many changed calendars at once, and a deadline.

Feed hosts on 127.0.0.1 stand in for the providers here: unlike the Google and
Graph fakes they can hold each answer back (``latency``) and count the
requests they answer at once, which is what these tests are about; the job
fetches a notified calendar the same way whatever its provider. The marks are
made as a verified notification makes them (``worklist.mark_changed``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db.models import Q
from django.utils import timezone

from calendars import sync_pool
from calendars.models import PushWork
from calendars.push import worklist
from providers.parse_template import parse_feed_bounded
from sweeps.sync_changed import run_sync_changed
from tests.calendars.conftest import NOW, make_connection
from tests.calendars.ics_samples import SINGLE
from tests.fakes.base import Answer
from tests.fakes.ics_server import FakeIcsFeed
from tests.sweeps.factories import rows


@pytest.fixture
def feed_host(settings) -> Iterator[FakeIcsFeed]:
    settings.CALENDAR_PUSH_BASE_URL = "https://nudge.example.com"
    # The process's parse template, started before anything is timed.
    parse_feed_bounded(SINGLE, start=NOW, end=NOW + timedelta(days=1))
    with FakeIcsFeed() as host:
        host.body = SINGLE
        yield host


def notified_users(make_user, host: FakeIcsFeed, count: int) -> list:
    """``count`` users, each with one calendar the provider said changed (oldest first)."""
    users = []
    for i in range(count):
        user = make_user()
        connection = make_connection(
            user, "ics", account="feed", feed_url=host.feed_url, allow_private_network=True
        )
        PushWork.objects.create(connection_id=connection.pk, user_id=user.pk)
        assert worklist.mark_changed(connection.pk, NOW - timedelta(seconds=count - i))
        users.append(user)
    return users


def still_marked() -> int:
    """Connections whose change is not done yet: waiting, or taken by a job."""
    return PushWork.objects.filter(
        Q(changed_at__isnull=False) | Q(taken_change_at__isnull=False)
    ).count()


def test_many_changed_calendars_are_fetched_at_once_and_every_user_requeued(
    make_user, settings, feed_host
):
    settings.CALENDAR_SYNC_CONCURRENCY = 16
    settings.CALENDAR_SYNC_PER_HOST = 16
    feed_host.latency = 0.3
    users = notified_users(make_user, feed_host, 12)

    started = time.monotonic()
    report = run_sync_changed(NOW + timedelta(minutes=1))
    elapsed = time.monotonic() - started

    # One at a time would be 12 x 0.3 s = 3.6 s of waiting alone.
    assert feed_host.max_in_flight >= 6
    assert elapsed < 3.6, elapsed
    assert report.connections == {"synced": 12} and report.requeued.queued == 12
    assert all(len(rows(user)) == 1 for user in users)
    # Done: nothing left for the next minute, which fetches nothing.
    assert (report.left_marked, still_marked()) == (0, 0)
    assert run_sync_changed(NOW + timedelta(minutes=2)).connections == {}
    assert len(feed_host.feed_calls()) == 12


def test_the_minute_job_keeps_to_the_sweeps_per_host_cap(make_user, settings, feed_host):
    settings.CALENDAR_SYNC_CONCURRENCY = 16
    settings.CALENDAR_SYNC_PER_HOST = 2
    feed_host.latency = 0.1
    users = notified_users(make_user, feed_host, 6)

    report = run_sync_changed(NOW + timedelta(minutes=1))

    # The sweep's per-host slots: from the setting, more as a fast, clean host earns
    # them, never over three quarters of the concurrency (pacing.host_slots).
    assert 2 <= feed_host.max_in_flight <= 12
    assert report.connections == {"synced": 6}
    assert all(len(rows(user)) == 1 for user in users)


def test_calendars_left_at_the_deadline_stay_marked_and_the_next_minute_fetches_them(
    make_user, settings, feed_host
):
    settings.CALENDAR_SYNC_CONCURRENCY = 2
    settings.CALENDAR_SYNC_PER_HOST = 2
    feed_host.latency = 0.8
    users = notified_users(make_user, feed_host, 6)

    # Past the deadline while the first two fetches are out: they finish, nothing else starts.
    first = run_sync_changed(NOW + timedelta(minutes=1), budget_seconds=0.4)

    assert first.connections["synced"] == 2 and len(feed_host.feed_calls()) == 2
    assert first.left_marked == still_marked() == 4
    queued_first = [user for user in users if rows(user)]
    assert len(queued_first) == 2

    feed_host.latency = 0.0
    second = run_sync_changed(NOW + timedelta(minutes=2))

    assert second.connections == {"synced": 4} and second.left_marked == 0
    assert all(len(rows(user)) == 1 for user in users)
    assert len(feed_host.feed_calls()) == 6  # the first two were not fetched again
    assert still_marked() == 0


def test_a_killed_minute_jobs_changes_come_back_when_its_hold_runs_out(
    make_user, settings, feed_host, monkeypatch
):
    """A job killed after taking its changes (SIGKILL: nothing settles them) loses
    none: they are not taken twice while it could still be running, and the next
    job after the hold runs out fetches them."""
    monkeypatch.setattr(worklist, "CHANGE_LEASE", timedelta(seconds=0.5))
    users = notified_users(make_user, feed_host, 3)
    assert len(worklist.take_changed()) == 3  # the job that is then killed

    assert run_sync_changed(NOW + timedelta(minutes=1)).connections == {}
    assert still_marked() == 3
    time.sleep(0.6)
    report = run_sync_changed(NOW + timedelta(minutes=2))

    assert report.connections == {"synced": 3}
    assert all(len(rows(user)) == 1 for user in users)
    assert still_marked() == 0


def test_a_change_notified_while_its_calendar_is_fetched_is_fetched_again(make_user, feed_host):
    [user] = notified_users(make_user, feed_host, 1)
    [taken] = worklist.take_changed()

    # The provider says it changed again while the job is fetching it.
    assert worklist.mark_changed(taken.connection_id, NOW)
    worklist.settle_changed([taken], done={taken.connection_id}, due={})

    assert still_marked() == 1
    assert run_sync_changed(NOW + timedelta(minutes=1)).connections == {"synced": 1}
    assert len(rows(user)) == 1 and still_marked() == 0


def test_a_calendar_whose_provider_must_wait_is_fetched_when_the_back_off_ends(
    make_user, feed_host, monkeypatch
):
    """On the real clock: the hold is on the database's. (A Retry-After this short is
    waited out within the run; here it counts as long.)"""
    monkeypatch.setattr(sync_pool, "IN_RUN_RETRY_WAIT", 0.5)
    notified_users(make_user, feed_host, 1)
    feed_host.next_answers = [Answer(503, b"busy", (("Retry-After", "1"),))]

    first = run_sync_changed(timezone.now())

    assert first.connections == {"failed": 1} and first.left_marked == 1
    # Held until the back-off ends, not read again every minute before it.
    assert run_sync_changed(timezone.now()).connections == {}
    time.sleep(1.1)
    assert run_sync_changed(timezone.now()).connections == {"synced": 1}
    assert still_marked() == 0
