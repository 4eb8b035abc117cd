"""The materializing sweep: which nudges get queued, once, and kept true."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from accounts.models import DeliverySettings
from calendars import sync_pool as calendar_sync
from calendars.models import ConnectionStatus, EventStatus
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from sweeps.replan import refresh_queue
from tenancy.scope import tenant_scope
from tests.conftest import utc
from tests.sweeps.factories import add_event, add_follow_up, rows, update

NOW = utc(2026, 12, 2, 12, 0)


def test_default_lead_for_events_and_follow_ups(make_user):
    user = make_user()
    event = add_event(user, NOW + timedelta(hours=1))
    follow_up = add_follow_up(user, NOW + timedelta(hours=2))
    report = run_materialize(NOW)
    assert report.queued == 2
    assert [(r.kind, r.ref_id, r.fire_at) for r in rows(user)] == [
        ("event", event.pk, NOW + timedelta(minutes=50)),
        ("follow_up", follow_up.pk, NOW + timedelta(minutes=110)),
    ]


def test_the_events_own_reminder_wins_over_the_default(make_user):
    user = make_user(default_lead_minutes=10)
    add_event(user, NOW + timedelta(hours=1), reminder_minutes=[30])
    run_materialize(NOW)
    assert [r.fire_at for r in rows(user)] == [NOW + timedelta(minutes=30)]


def test_one_nudge_per_distinct_reminder_lead(make_user):
    user = make_user()
    add_event(user, NOW + timedelta(hours=2), reminder_minutes=[30, 5, 30, 60])
    run_materialize(NOW)
    assert [r.fire_at for r in rows(user)] == [
        NOW + timedelta(minutes=60),
        NOW + timedelta(minutes=90),
        NOW + timedelta(minutes=115),
    ]


def test_all_day_cancelled_declined_and_done_get_no_nudge(make_user):
    user = make_user()
    add_event(user, NOW + timedelta(hours=1), all_day=True)
    add_event(user, NOW + timedelta(hours=1), status=EventStatus.CANCELLED)
    add_event(user, NOW + timedelta(hours=1), declined=True)
    done = add_follow_up(user, NOW + timedelta(hours=1))
    update(user, done, done=True)
    assert run_materialize(NOW).queued == 0
    assert rows(user) == []


def test_only_the_look_ahead_window_is_queued(make_user, settings):
    settings.NUDGE_LOOKAHEAD_MINUTES = 180
    user = make_user()
    add_event(user, NOW + timedelta(minutes=190))  # fires at +180: inside
    add_event(user, NOW + timedelta(minutes=191))  # fires at +181: next run
    assert run_materialize(NOW).queued == 1


def test_a_long_reminder_lead_is_queued_while_the_event_is_far_away(make_user):
    user = make_user()
    add_event(user, NOW + timedelta(hours=20), reminder_minutes=[24 * 60])
    run_materialize(NOW)
    # A day-ahead reminder for an event 20 h away fired 4 h ago: past grace, not queued.
    assert rows(user) == []
    add_event(user, NOW + timedelta(hours=25), reminder_minutes=[24 * 60])
    run_materialize(NOW + timedelta(minutes=15))  # the next cycle
    assert [r.fire_at for r in rows(user)] == [NOW + timedelta(hours=1)]


def test_running_twice_queues_each_nudge_once(make_user):
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    assert run_materialize(NOW).queued == 1
    second = run_materialize(NOW + timedelta(minutes=15))
    assert (second.queued, second.removed) == (0, 0)
    assert len(rows(user)) == 1


def test_a_nudge_already_sent_is_not_queued_again_by_a_later_run(make_user, recording_channel):
    """A run just after the send still plans the nudge (the event has not begun) and
    no longer sees it pending: only the unique key stops a second row, and a
    second "starts in 10 min" to the user."""
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    assert run_deliver(NOW + timedelta(minutes=50)).sent == 1
    again = run_materialize(NOW + timedelta(minutes=51))
    assert again.queued == 0, "the sent nudge was queued a second time"
    assert [r.outcome for r in rows(user)] == ["sent"]
    assert run_deliver(NOW + timedelta(minutes=52)).claimed == 0
    assert len(recording_channel.sent) == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_queue_each_nudge_once(make_user):
    """Overlapping sweeps: the run lock lets one do the work, the others nothing."""
    users = [make_user() for _ in range(5)]
    for user in users:
        for hour in (1, 2):
            add_event(user, NOW + timedelta(hours=hour))
    barrier = threading.Barrier(4)
    reports, errors = [], []

    def worker() -> None:
        try:
            barrier.wait()
            reports.append(run_materialize(NOW))
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(report.queued for report in reports) == 10
    assert all(len(rows(user)) == 2 for user in users)


@pytest.mark.django_db(transaction=True)
def test_a_users_change_during_the_sweep_queues_their_nudges_once(
    make_user, recording_channel, monkeypatch
):
    """The sweep and a user's own change (``refresh_queue``, outside the run lock)
    materialize the same user at once: both read the queue before either writes,
    and still each nudge is queued once and sent once."""
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    add_follow_up(user, NOW + timedelta(hours=1))
    both_read = threading.Barrier(2, timeout=10)
    writers = []
    real_enqueue = transitions.enqueue_many

    def insert_once_both_have_read(*args, **kwargs):
        both_read.wait()  # neither has written yet: each saw an empty queue
        writers.append(threading.current_thread().name)
        return real_enqueue(*args, **kwargs)

    monkeypatch.setattr(transitions, "enqueue_many", insert_once_both_have_read)
    reports = []

    def sweep() -> None:
        try:
            reports.append(run_materialize(NOW, sync_calendars=False))
        finally:
            connection.close()

    def users_change() -> None:
        try:
            refresh_queue(user.pk, NOW)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep), threading.Thread(target=users_change)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(writers) == 2, "the two materializations did not overlap"
    [report] = reports
    assert report.ok
    assert sorted(r.kind for r in rows(user)) == ["event", "follow_up"], "a nudge was queued twice"
    run_deliver(NOW + timedelta(minutes=50))
    assert len(recording_channel.sent) == 2


def test_moving_an_event_re_times_its_nudge_and_drops_the_stale_one(make_user, recording_channel):
    user = make_user()
    event = add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    update(user, event, starts_at=NOW + timedelta(hours=2))
    report = run_materialize(NOW + timedelta(minutes=15))
    assert (report.queued, report.removed) == (1, 1)
    # Withdrawn within the set's planning, not by the fallback of one user at a time.
    assert report.sets_planned_alone == 0, report.planned_alone_because
    assert [r.fire_at for r in rows(user)] == [NOW + timedelta(minutes=110)]
    # At the old fire time nothing is due, and nothing is sent.
    run_deliver(NOW + timedelta(minutes=50))
    assert recording_channel.sent == []
    # Moved back: queued afresh, not blocked by a leftover row.
    update(user, event, starts_at=NOW + timedelta(hours=1))
    assert run_materialize(NOW + timedelta(minutes=30)).queued == 1


def test_cancelled_deleted_and_done_subjects_lose_their_pending_rows(make_user):
    user = make_user()
    cancelled = add_event(user, NOW + timedelta(hours=1))
    deleted = add_event(user, NOW + timedelta(hours=1, minutes=5))
    done = add_follow_up(user, NOW + timedelta(hours=1))
    retimed = add_follow_up(user, NOW + timedelta(hours=2))
    run_materialize(NOW)
    assert len(rows(user)) == 4
    update(user, cancelled, status=EventStatus.CANCELLED)
    with tenant_scope(user.pk):
        type(deleted).objects.filter(pk=deleted.pk).delete()
    update(user, done, done=True)
    update(user, retimed, due_at=NOW + timedelta(hours=2, minutes=30))
    report = run_materialize(NOW + timedelta(minutes=15))  # the next cycle
    assert (report.removed, report.queued) == (4, 1)
    assert report.sets_planned_alone == 0, report.planned_alone_because
    assert [(r.kind, r.ref_id) for r in rows(user)] == [("follow_up", retimed.pk)]


def test_a_past_fire_time_is_queued_only_inside_grace_and_before_the_subject(make_user, settings):
    settings.NUDGE_GRACE_MINUTES = 15
    user = make_user(default_lead_minutes=30)
    inside = add_event(user, NOW + timedelta(minutes=20))  # fired 10 min ago: in grace
    add_event(user, NOW + timedelta(minutes=10))  # fired 20 min ago: past grace
    add_event(user, NOW - timedelta(minutes=1))  # already begun
    run_materialize(NOW)
    assert [(r.ref_id, r.fire_at) for r in rows(user)] == [(inside.pk, NOW - timedelta(minutes=10))]


def test_disabled_users_get_nothing_and_lose_pending_rows(make_user):
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user=user).update(enabled=False)
    report = run_materialize(NOW + timedelta(minutes=15))
    assert (report.removed, report.disabled_users) == (1, 1)
    assert rows(user) == []


def test_a_calendar_needing_reauth_stops_event_nudges_but_not_follow_ups(make_user):
    user = make_user()
    event = add_event(user, NOW + timedelta(hours=1))
    add_follow_up(user, NOW + timedelta(hours=1))
    update(user, event.connection, status=ConnectionStatus.NEEDS_REAUTH)
    run_materialize(NOW)
    assert [r.kind for r in rows(user)] == ["follow_up"]


def test_one_users_failure_is_counted_and_the_sweep_goes_on(make_user, monkeypatch):
    good, bad, also_good = make_user(), make_user(), make_user()
    for user in (good, bad, also_good):
        add_event(user, NOW + timedelta(hours=1))

    real = calendar_sync.read_user_connections

    def connections_of(user_id, now, window, config, only=None):
        if user_id == bad.pk:
            raise ValueError("malformed calendar payload")
        return real(user_id, now, window, config, only)

    monkeypatch.setattr(calendar_sync, "read_user_connections", connections_of)
    report = run_materialize(NOW)
    assert (report.users, report.failed_users, report.queued) == (3, 1, 2)
    assert not report.ok
    run = SweepRun.objects.get(sweep="materialize")
    assert run.status == "failed"
    assert f"user {bad.pk}: ValueError" in run.error


def test_the_command_prints_a_summary_and_records_the_run(make_user, capsys):
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    call_command("materialize", "--now", "2026-12-02T12:00:00Z")
    out = capsys.readouterr().out
    assert "materialize: users 1, queued 1, removed 0" in out
    run = SweepRun.objects.get()
    assert (run.sweep, run.status, run.counts["queued"]) == ("materialize", "ok", 1)


def test_now_without_an_offset_is_refused(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no UTC offset"):
        call_command("materialize", "--now", "2026-12-02T12:00:00")
