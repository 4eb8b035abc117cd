"""The sync's writes, now hand-written statements (calendars/statements.py): what the
ORM did before, kept — events updated in place, the outcome's columns, a connection
deleted meanwhile, a resync requested meanwhile."""

from __future__ import annotations

from datetime import timedelta

import pytest

from calendars.models import CalendarConnection
from calendars.snapshot import snapshot_of
from calendars.sync import FetchJob, write_job
from core.config import NudgeConfig
from providers import ics as ics_provider
from providers.base import FetchResult, ProviderEvent
from tenancy.scope import tenant_scope
from tests.calendars.conftest import NOW, events_of, reload, run_sync
from tests.calendars.ics_samples import FEED

pytestmark = pytest.mark.django_db

T9 = NOW + timedelta(hours=1)
HOUR = timedelta(hours=1)

# Inside a test's transaction the write runs in tenant_scope, one statement after
# another; with committed rows (as in a run) it is one round trip (tenant_statements).
BOTH_WRITE_PATHS = pytest.mark.parametrize(
    "write_path",
    ["in a scope", pytest.param("one round trip", marks=pytest.mark.django_db(transaction=True))],
)


def occurrence(event_id, starts_at, occurrence_start=None, **fields) -> ProviderEvent:
    values = {
        "title": "Design review",
        "ends_at": starts_at + HOUR,
        "all_day": False,
        "status": "confirmed",
        "declined": False,
        "reminder_minutes": (10,),
        **fields,
    }
    return ProviderEvent(event_id, occurrence_start, starts_at=starts_at, **values)


def apply(connection, events):
    """Write ``events`` as a sync writes a changed copy; (created, updated, deleted)."""
    with tenant_scope(connection.user_id):
        snapshot = snapshot_of(connection, NudgeConfig.from_settings())
    fetched = FetchResult(changed=True, events=events)
    job = FetchJob(
        connection.user_id, connection.pk, connection.provider, snapshot, fetched=fetched
    )
    result = write_job(job, NOW)
    return result.created, result.updated, result.deleted


def while_fetching(monkeypatch, change) -> None:
    """Let the feed be fetched, then ``change`` the connection's row (a queryset, in its
    owner's scope) before the sync writes: what a user or another sync does meanwhile."""
    original = ics_provider.fetch

    def fetch_then_change(snapshot, **kwargs):
        result = original(snapshot, **kwargs)
        with tenant_scope(snapshot.user_id):
            change(CalendarConnection.objects.filter(pk=snapshot.connection_id))
        return result

    monkeypatch.setattr(ics_provider, "fetch", fetch_then_change)


def test_events_are_updated_in_place_created_and_deleted(ics_connection):
    connection = ics_connection()
    series = [occurrence("s", T9 + i * HOUR, occurrence_start=T9 + i * HOUR) for i in range(3)]
    assert apply(connection, [occurrence("a", T9), *series, occurrence("gone", T9)]) == (5, 0, 0)
    ids = {(e.provider_event_id, e.occurrence_start): e.pk for e in events_of(connection)}
    before = {e.pk: e.updated_at for e in events_of(connection)}

    # Same keys, one single event and one instance changed, one row no longer there.
    changed = [
        occurrence("a", T9, title="Moved", reminder_minutes=(5, 15), location="Room 2"),
        series[0],
        occurrence("s", T9 + HOUR, occurrence_start=T9 + HOUR, declined=True, ends_at=None),
        series[2],
        occurrence("new", T9 + 3 * HOUR),
    ]
    assert apply(connection, changed) == (1, 2, 1)

    rows = {(e.provider_event_id, e.occurrence_start): e for e in events_of(connection)}
    assert set(rows) == {*ids, ("new", None)} - {("gone", None)}
    for key, row in rows.items():
        assert key == ("new", None) or row.pk == ids[key]  # ids kept: queued nudges point at them
    moved = rows[("a", None)]
    assert (moved.title, moved.reminder_minutes, moved.location) == ("Moved", [5, 15], "Room 2")
    declined = rows[("s", T9 + HOUR)]
    assert declined.declined and declined.ends_at is None
    untouched = rows[("s", T9)]
    assert untouched.updated_at == before[untouched.pk]  # nothing differed: not written

    # The same set again writes nothing.
    assert apply(connection, changed) == (0, 0, 0)


def test_a_duplicate_occurrence_keeps_the_last_one(ics_connection):
    connection = ics_connection()
    twice = [occurrence("a", T9, title="first"), occurrence("a", T9, title="second")]
    assert apply(connection, twice) == (1, 0, 0)
    assert [e.title for e in events_of(connection)] == ["second"]


@BOTH_WRITE_PATHS
def test_a_connection_deleted_while_fetching_is_gone_and_nothing_is_written(
    fake_ics, ics_connection, monkeypatch, write_path
):
    fake_ics.body = FEED
    connection = ics_connection()
    while_fetching(monkeypatch, lambda row: row.delete())
    summary = run_sync(connection.user_id)

    assert [r.outcome for r in summary.results] == ["gone"]
    assert events_of(connection) == []


@BOTH_WRITE_PATHS
def test_a_resync_requested_while_fetching_is_kept_for_the_next_run(
    fake_ics, ics_connection, monkeypatch, write_path
):
    fake_ics.body = FEED
    connection = ics_connection()
    while_fetching(monkeypatch, lambda row: row.update(resync_requested=True))
    assert run_sync(connection.user_id).synced == 1
    assert reload(connection).resync_requested is True
    monkeypatch.undo()

    assert run_sync(connection.user_id, NOW + timedelta(minutes=15)).synced == 1  # a full fetch
    assert reload(connection).resync_requested is False


@BOTH_WRITE_PATHS
def test_an_unchanged_feed_clears_a_failure_and_keeps_a_note(fake_ics, ics_connection, write_path):
    fake_ics.body = FEED
    connection = ics_connection()
    assert run_sync(connection.user_id).synced == 1
    with tenant_scope(connection.user_id):
        CalendarConnection.objects.filter(pk=connection.pk).update(
            status="error", last_error="ics: HTTP 503"
        )
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))
    assert summary.unchanged == 1
    stored = reload(connection)
    assert (stored.status, stored.last_error, stored.retry_after) == ("active", "", None)

    with tenant_scope(connection.user_id):
        CalendarConnection.objects.filter(pk=connection.pk).update(last_error="synced, with")
    summary = run_sync(connection.user_id, NOW + timedelta(minutes=30))
    assert summary.unchanged == 1 and summary.results[0].message == "synced, with"
    assert reload(connection).last_error == "synced, with"
