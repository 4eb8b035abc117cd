"""The queue's day partitions: made ahead by the owner, a gap reported before it
bites and loud when it does, and retention dropping whole days (issue 25, item 3)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from django.core.management import call_command
from django.db import IntegrityError

from console.health import check_health
from scheduled_sends.models import Kind, ScheduledSend, SweepRun
from scheduled_sends.queue.partitions import (
    DAY,
    day_start,
    drop_aged_partitions,
    make_partitions,
    partition_name,
    partitions,
)
from scheduled_sends.queue.transitions import database_now, prune_settled
from sweeps.materialize import run_materialize
from tenancy.checks import rls_problems
from tenancy.rls import tenant_table_security
from tenancy.scope import support_scope, tenant_scope
from tests.conftest import owner_conninfo
from tests.support.queue import queue_nudge
from tests.sweeps.factories import add_follow_up

HOUR = timedelta(hours=1)
_ref_ids = itertools.count(1)


@pytest.fixture
def partitions_restored(transactional_db) -> Iterator[None]:
    """Put the partition layout back as the migrations left it: these tests make
    and drop partitions, which are committed DDL, not rolled back with a test."""
    before = partitions()
    yield
    after = {part.name for part in partitions()}
    with psycopg.connect(owner_conninfo(), autocommit=True) as conn:
        for name in after - {part.name for part in before}:
            conn.execute(f"DROP TABLE {name}")
        for part in before:
            if part.name in after:
                continue
            start = "MINVALUE" if part.start is None else f"'{part.start.isoformat()}'"
            conn.execute(
                f"CREATE TABLE {part.name} PARTITION OF scheduled_sends "
                f"FOR VALUES FROM ({start}) TO ('{part.end.isoformat()}')"
            )
            for statement in tenant_table_security(part.name, like="scheduled_sends"):
                conn.execute(statement)
    assert [(p.name, p.start, p.end) for p in partitions()] == [
        (p.name, p.start, p.end) for p in before
    ]


def _row(user, at, *, outcome: str | None) -> int:
    with tenant_scope(user.pk):
        return ScheduledSend.objects.create(
            user=user,
            kind=Kind.FOLLOW_UP,
            ref_id=next(_ref_ids),
            intended_at=at,
            fire_at=at,
            subject_starts_at=at + timedelta(minutes=10),
            outcome=outcome,
            sent_at=at if outcome == "sent" else None,
        ).pk


def _remaining() -> set[int]:
    with support_scope():
        return set(ScheduledSend.objects.values_list("pk", flat=True))


def test_make_partitions_adds_the_missing_days_with_the_queues_security(
    partitions_restored, capsys
):
    """Issue 25, item 3: partitions are made ahead by the owner role, on their own
    cron line; a second run makes nothing, and every new one passes the RLS check."""
    today = database_now().date()
    last = max(partitions(), key=lambda p: p.end)
    days = (last.end.date() - today).days + 1

    call_command("make_partitions", "--days-ahead", str(days))
    made = [partition_name(last.end.date()), partition_name(last.end.date() + DAY)]
    out = capsys.readouterr().out
    assert f"made 2 ({', '.join(made)})" in out, out
    assert f"partitioned through {day_start(last.end.date() + 2 * DAY):%Y-%m-%d %H:%M}Z" in out
    assert rls_problems() == []

    call_command("make_partitions", "--days-ahead", str(days))
    assert "made 0 (none needed)" in capsys.readouterr().out


def test_an_insert_for_a_day_without_a_partition_fails_loudly(make_user):
    """Issue 25, item 3: no DEFAULT partition, so nothing is silently kept nowhere."""
    user = make_user()
    beyond = max(part.end for part in partitions()) + 30 * DAY
    with pytest.raises(IntegrityError, match="no partition of relation"):
        queue_nudge(user.pk, ref_id=1, at=beyond, subject_starts_at=beyond + HOUR)


def test_health_reports_partitions_that_end_too_soon(db):
    """Issue 25, item 3: a missing future partition is an error health reports,
    days before the first insert fails, and again once inserts are failing."""
    now = database_now()
    reach = max(part.end for part in partitions())

    def partitions_check(at):
        return next(c for c in check_health(at).checks if c.name == "queue_partitions")

    assert partitions_check(now).ok
    soon = partitions_check(reach - 2 * DAY)
    assert not soon.ok
    assert "they will fail; run manage.py make_partitions as the owner" in soon.detail
    failing = partitions_check(reach - HOUR)
    assert not failing.ok and "inserts past it fail now" in failing.detail
    assert "every insert fails" in partitions_check(reach + DAY).detail


def test_materialize_reports_a_user_whose_day_has_no_partition(make_user):
    """Issue 25, item 3: materialize counts the user as failed (the run fails and
    health shows it), never a silent no-op insert. Planned in a set with another
    user whose day exists: the set fails, each is planned alone, the other is
    queued, and the run log says the set had to be split."""
    fine, stranded = make_user("fine"), make_user("stranded")
    last_day_ends = max(part.end for part in partitions())
    now = last_day_ends - HOUR
    add_follow_up(fine, now + HOUR / 2)  # its nudge falls on the last day made
    add_follow_up(stranded, now + 2 * HOUR)  # the day after it: no partition

    report = run_materialize(now, sync_calendars=False)

    assert report.failed_users == 1
    assert report.errors == [f"user {stranded.pk}: IntegrityError"]
    assert report.queued == 1 and report.sets_planned_alone == 1
    assert "1 set of users could not be planned together" in report.summary()
    assert "IntegrityError" in report.summary()
    assert SweepRun.objects.get(sweep=SweepRun.Sweep.MATERIALIZE).status == SweepRun.Status.FAILED


def test_retention_drops_whole_aged_days_and_keeps_a_day_with_unsettled_rows(
    partitions_restored, make_user
):
    """Issue 25, item 3: retention drops whole partitions older than the window; a
    day still holding an unsettled row is kept (work, or evidence delivery is
    stuck) and its settled rows go by the batched delete, as does the partial
    day at the cut-off."""
    first = database_now().date() + 100 * DAY
    made = make_partitions(first, 2)
    assert made == [partition_name(first + n * DAY) for n in range(3)]
    aged, holding, partial = (day_start(first + n * DAY) for n in range(3))
    cutoff = partial + 12 * HOUR
    alice, bob = make_user(), make_user()
    dropped_rows = {_row(u, aged + 9 * HOUR, outcome="sent") for u in (alice, bob)}
    kept_pending = _row(alice, holding + 9 * HOUR, outcome=None)
    deleted_settled = {
        _row(bob, holding + 10 * HOUR, outcome="failed"),
        _row(bob, partial + 9 * HOUR, outcome="sent"),
    }
    kept_recent = _row(alice, partial + 15 * HOUR, outcome="sent")
    # Months old and never settled: its partition (the table the migration attached) stays.
    kept_old_pending = _row(bob, database_now() - 90 * DAY, outcome=None)

    dropped = drop_aged_partitions(cutoff)
    deleted = prune_settled(cutoff, batch=1)

    names = {part.name for part in partitions()}
    assert partition_name(first) in {d.name for d in dropped}
    assert {partition_name(first + DAY), partition_name(first + 2 * DAY)} <= names
    assert partition_name(first) not in names
    assert "scheduled_sends_before" in names
    assert deleted == len(deleted_settled)
    left = _remaining()
    assert left == {kept_pending, kept_recent, kept_old_pending}
    assert not (dropped_rows | deleted_settled) & left
