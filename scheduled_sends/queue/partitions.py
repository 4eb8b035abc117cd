"""The queue's day partitions (UTC day of ``intended_at``): made ahead and dropped as
the owner role, checked by health. No DEFAULT partition, on purpose: an insert for a
missing day fails loudly, and health warns days ahead. Each partition gets the parent's
FORCE row-level security, policies and grants (PostgreSQL applies its own when named)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction

from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import statements
from scheduled_sends.queue.states import unsettled
from scheduled_sends.queue.transitions import run_statement
from tenancy.owner import connected_as_owner
from tenancy.rls import tenant_table_security
from tenancy.scope import rls_bypass

PARENT = "scheduled_sends"
DAY = timedelta(days=1)


@dataclass(frozen=True)
class Partition:
    """One partition and its range of intended instants, ``[start, end)``."""

    name: str
    start: datetime | None  # None: from the beginning (the table before partitioning)
    end: datetime

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return (self.start is None or self.start < end) and start < self.end


@dataclass(frozen=True)
class Dropped:
    name: str
    rows: int  # the planner's estimate (reltuples), not a count


def partition_name(day: date) -> str:
    return f"{PARENT}_p{day:%Y%m%d}"


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def partitions() -> list[Partition]:
    """Every partition of the queue, by the end of its range; any role may read this."""
    return [Partition(*row) for row in run_statement(statements.QUEUE_PARTITIONS)[0]]


def covered_until(now: datetime, existing: list[Partition] | None = None) -> datetime | None:
    """How far from ``now`` partitions reach without a gap; None if ``now`` has none."""
    reach = now
    for part in sorted(existing if existing is not None else partitions(), key=lambda p: p.end):
        if part.end <= reach:
            continue
        if part.start is not None and part.start > reach:
            break
        reach = part.end
    return reach if reach > now else None


# A stopped make_partitions cron is reported this long before an insert fails.
COVERAGE_MARGIN = timedelta(days=2)


def coverage_problem(
    now: datetime, queued_until: datetime, existing: list[Partition] | None = None
) -> str | None:
    """None when partitions reach ``COVERAGE_MARGIN`` past ``queued_until``; else why not."""
    reach = covered_until(now, existing)
    if reach is None:
        return f"no partition holds now ({now:%Y-%m-%d %H:%M}Z): every insert fails"
    if reach < queued_until + COVERAGE_MARGIN:
        failing = "inserts past it fail now" if reach < queued_until else "they will fail"
        return (
            f"partitioned only through {reach:%Y-%m-%d %H:%M}Z, and materialize queues up to "
            f"{queued_until:%Y-%m-%d %H:%M}Z: {failing}; run manage.py make_partitions as the owner"
        )
    return None


def make_partitions(today: date, days_ahead: int) -> list[str]:
    """Create, idempotently and as the owner, each missing day partition from ``today``
    through ``today + days_ahead``, with the parent's RLS and grants; the names made."""
    made: list[str] = []
    with connected_as_owner(), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statements.PARTITION_LOCK_TIMEOUT)
        existing = partitions()
        for offset in range(days_ahead + 1):
            day = today + offset * DAY
            start, end = day_start(day), day_start(day + DAY)
            if any(part.overlaps(start, end) for part in existing):
                continue
            name = partition_name(day)
            cursor.execute(
                statements.CREATE_DAY_PARTITION.format(name=name), {"start": start, "end": end}
            )
            for statement in tenant_table_security(name, like=PARENT):
                cursor.execute(statement)
            made.append(name)
    return made


def drop_aged_partitions(cutoff: datetime, progress: Callable[[Dropped], None] | None = None):
    """Drop every partition whose whole range is before ``cutoff`` and that holds only
    settled rows; what was dropped. Safe because ``fire_at <= intended_at``: such a
    partition holds only rows the batched delete would take too. Qualifying is read under
    the bypass; the drop is the owner's, connected only when something qualifies."""
    unsettled_rows = ScheduledSend.objects.filter(unsettled())
    with rls_bypass():
        droppable = [
            part
            for part in partitions()
            if part.end <= cutoff
            and not unsettled_rows.filter(
                intended_at__gte=part.start or datetime.min.replace(tzinfo=UTC),
                intended_at__lt=part.end,
            ).exists()
        ]
    if not droppable:
        return []
    dropped: list[Dropped] = []
    with connected_as_owner():
        for part in droppable:
            # One transaction each: a lock timeout on one day leaves the others dropped.
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(statements.PARTITION_LOCK_TIMEOUT)
                cursor.execute(statements.PARTITION_ROWS, [part.name])
                rows = cursor.fetchone()[0]
                cursor.execute(statements.DROP_PARTITION.format(name=part.name))
            dropped.append(Dropped(part.name, rows))
            if progress:
                progress(dropped[-1])
    return dropped
