"""The queue's day partitions: made ahead, checked by health, dropped whole by retention.

``scheduled_sends`` is range-partitioned by the UTC day of ``intended_at``
(migration ``queue_partitioned_by_intended_day``); the unique key already holds that column, and the
primary key is ``(id, intended_at)`` in the database while Django keeps
``id`` as the model's pk (ids come from one identity sequence, so ``id``
alone still names one row; every lookup by id is served by the primary key's
leading column in each partition).

The runtime role is DML-only, so partitions are created and dropped by the
owner role (``tenancy/owner.py``): ``manage.py make_partitions`` on its own
cron line, and ``manage.py prune_sends``, which drops the days that aged out
of retention before it deletes what is left row by row. There is no DEFAULT
partition on purpose: an insert for a day nobody made fails loudly
(materialize reports the user as failed), and health says so first
(:func:`coverage_problem`), days ahead.

Each partition gets the parent's FORCE row-level security, policies and
grants (``tenancy.rls.tenant_table_security``): PostgreSQL applies a
partition's own when it is named directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db import OperationalError, connection, transaction

from scheduled_sends.queue import statements
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
    """The partition of one UTC day: ``scheduled_sends_p20261206``."""
    return f"{PARENT}_p{day:%Y%m%d}"


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def partitions() -> list[Partition]:
    """Every partition of the queue, by the end of its range; any role may read this."""
    with connection.cursor() as cursor:
        cursor.execute(statements.QUEUE_PARTITIONS)
        return [Partition(name, start, end) for name, start, end in cursor.fetchall()]


def covered_until(now: datetime, existing: list[Partition] | None = None) -> datetime | None:
    """How far, from ``now``, intended instants have a partition without a gap; None if
    ``now`` itself has none."""
    reach = None
    for part in sorted(existing if existing is not None else partitions(), key=lambda p: p.end):
        if part.end <= now:
            continue
        if reach is None:
            if not part.overlaps(now, now + timedelta(microseconds=1)):
                return None
            reach = part.end
        elif part.start is not None and part.start <= reach:
            reach = max(reach, part.end)
        else:
            break
    return reach


# Health wants this much partitioned beyond the furthest instant materialize
# queues, so a stopped make_partitions cron is reported days before an insert fails.
COVERAGE_MARGIN = timedelta(days=2)


def coverage_problem(
    now: datetime, queued_until: datetime, existing: list[Partition] | None = None
) -> str | None:
    """None when every instant materialize may queue (up to ``queued_until``), and
    ``COVERAGE_MARGIN`` beyond, has a partition; otherwise the sentence health shows."""
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
    """Create each missing day partition from ``today`` through ``today + days_ahead``,
    as the owner, with the parent's row-level security and grants; the names made.

    A day already inside another partition's range (the one the migration
    attached, which reaches a few days ahead) is left to it. Idempotent.
    """
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
    settled rows; what was dropped.

    ``cutoff`` is retention's, on ``fire_at``; ``fire_at <= intended_at``, so a
    partition whose intended instants all precede the cut-off holds only rows
    the batched delete would delete too. A partition still holding unsettled
    rows is kept (they are work, or evidence that delivery is stuck), and the
    batched delete takes its settled rows. Which partitions qualify is read
    under the bypass, the one role that sees every tenant's rows; the drop
    itself is the owner's. Returns ``[]`` without the owner's connection when
    nothing qualifies.
    """
    aged = [part for part in partitions() if part.end <= cutoff]
    droppable = []
    for part in aged:
        with rls_bypass(), connection.cursor() as cursor:
            start = part.start or datetime.min.replace(tzinfo=UTC)
            cursor.execute(statements.RANGE_HOLDS_UNSETTLED, {"start": start, "end": part.end})
            if not cursor.fetchone()[0]:
                droppable.append(part)
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


def owner_unreachable(exc: OperationalError) -> str:
    """What retention says when it cannot connect as the owner to drop partitions."""
    return (
        f"could not connect as the owner role to drop aged partitions ({exc}); "
        "their settled rows are deleted in batches instead"
    )
