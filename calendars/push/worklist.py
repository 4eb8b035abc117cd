"""The minute job's to-do list (``calendar_push_work``), one row per connection.

A notification sets ``changed_at`` only where it is empty, so a flood is one sync. A job
holds a taken mark for :data:`CHANGE_LEASE` and settles it; a killed job's takes come back
when the hold runs out. Work is taken with SKIP LOCKED, so jobs never share a row.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, models, transaction
from django.db.models import Q

from calendars import statements
from calendars.models import PushWork

# A channel due maintenance, or a release (``calendars.release``), taken by a minute job
# is not offered again for this long.
LEASE = timedelta(minutes=10)
# Per minute job; more waits for the next minute.
TAKE_LIMIT = 5000
# Longer than a minute job may run, so a live job's marks are never taken twice.
CHANGE_LEASE = timedelta(minutes=5)


@dataclass(frozen=True)
class Work:
    connection_id: int
    user_id: int
    # A taken change: when it was marked, and until when this job holds it.
    changed_at: datetime | None = None
    held_until: datetime | None = None


def enroll(connection_id: int, user_id: int, now: datetime) -> None:
    """A Google or Graph connection is due a channel now (connected, or reconnected)."""
    PushWork.objects.update_or_create(
        connection_id=connection_id, defaults={"user_id": user_id, "maintain_at": now}
    )


def request_fetch(connection_id: int, user_id: int, now: datetime, *, push_capable: bool) -> None:
    """A calendar added or reconnected needs fetching: recorded in the caller's
    transaction for the minute job, so no web request waits on a provider."""
    _, created = PushWork.objects.get_or_create(
        connection_id=connection_id,
        defaults={"user_id": user_id, "changed_at": now, "push_capable": push_capable},
    )
    if not created:
        mark_changed(connection_id, now)


def mark_changed(connection_id: int, now: datetime) -> bool:
    """Record that the connection changed; False if it was already marked. A row whose
    mark is taken is marked again: its job may have fetched before the change."""
    return bool(
        PushWork.objects.filter(connection_id=connection_id, changed_at__isnull=True).update(
            changed_at=now
        )
    )


def schedule(connection_id: int, maintain_at: datetime | None, *, polling: bool) -> None:
    PushWork.objects.filter(connection_id=connection_id).update(
        maintain_at=maintain_at, polling=polling
    )


def forget(connection_id: int) -> None:
    PushWork.objects.filter(connection_id=connection_id).delete()


def take_changed() -> list[Work]:
    """The notified connections, oldest first, each held for :data:`CHANGE_LEASE`
    until ``settle_changed``."""
    with connection.cursor() as cursor:
        cursor.execute(statements.TAKE_CHANGED, {"limit": TAKE_LIMIT, "lease": CHANGE_LEASE})
        rows = cursor.fetchall()
    taken = sorted(rows, key=lambda row: (row[2], row[0]))  # the oldest mark first
    return [Work(*row) for row in taken]


def settle_changed(
    taken: Iterable[Work], *, done: Collection[int], due: Mapping[int, datetime]
) -> None:
    """Settle taken changes: those of ``done`` are cleared; those of ``due`` held
    until the instant given (a back-off's end); the rest put back as they were,
    due now."""
    settled = [work for work in taken if work.held_until is not None]
    if not settled:
        return

    def outcome(work: Work) -> str:
        if work.connection_id in done:
            return "done"
        return "wait" if work.connection_id in due else "back"

    params = {
        "ids": [work.connection_id for work in settled],
        "outcomes": [outcome(work) for work in settled],
        "untils": [due.get(work.connection_id) for work in settled],
        "holds": [work.held_until for work in settled],
    }
    with connection.cursor() as cursor:
        cursor.execute(statements.SETTLE_CHANGED, params)


def take_maintenance(now: datetime) -> list[Work]:
    """Connections whose channel is due now, each held for :data:`LEASE`."""
    rows = take_leased(PushWork, "maintain_at", now, TAKE_LIMIT)
    return [Work(cid, uid) for cid, uid in rows]


def take_leased(
    model: type[models.Model], due: str, now: datetime, limit: int
) -> list[tuple[int, int]]:
    """(connection id, user id) of ``model``'s rows due by ``now``, oldest first; each is
    moved :data:`LEASE` ahead so no other job takes it meanwhile (SKIP LOCKED), and comes
    back by itself if the job taking it dies."""
    with transaction.atomic():
        rows = list(
            model.objects.select_for_update(skip_locked=True)
            .filter(**{f"{due}__lte": now})
            .order_by(due)
            .values_list("connection_id", "user_id")[:limit]
        )
        model.objects.filter(connection_id__in=[cid for cid, _ in rows]).update(
            **{due: now + LEASE}
        )
    return rows


def release_maintenance(works: Iterable[Work], now: datetime) -> None:
    """Channels taken but not started (the job ran out of time): due again now, so
    the next minute job does them rather than the lease's end."""
    PushWork.objects.filter(
        connection_id__in=[work.connection_id for work in works],
        maintain_at=now + LEASE,
    ).update(maintain_at=now)


# A mark or a due channel older than this means the minute job is not running.
STALE_CHANGE = timedelta(minutes=5)
STALE_MAINTENANCE = LEASE + timedelta(minutes=5)
IS_THE_JOB_RUNNING = "is `manage.py sync_changed` running every minute?"


def push_health(now: datetime, push_configured: bool) -> tuple[bool, str, dict[str, int]]:
    """Push as health sees it, from the work list alone (no tenant rows are read):
    whether it is well, the sentence saying so, and its figures."""
    rows = PushWork.objects
    minutes = STALE_CHANGE.seconds // 60
    if not push_configured:
        # The minute job still fetches what people added.
        waiting = rows.filter(changed_at__lt=now - STALE_CHANGE).count()
        detail = "push is not configured (PUBLIC_BASE_URL): every calendar is polled"
        if waiting:
            detail += f"; {waiting} calendars people added or reconnected not fetched for "
            detail += f"{minutes} min: {IS_THE_JOB_RUNNING}"
        return not waiting, detail, {"push_changes_waiting": waiting}
    pushed = rows.filter(push_capable=True)
    figures = {
        "push_live": pushed.filter(polling=False).count(),
        "push_polling": pushed.filter(polling=True).count(),
        # Old marks, and a killed job's takes whose hold ran out that long ago.
        "push_changes_waiting": rows.filter(
            Q(changed_at__lt=now - STALE_CHANGE)
            | Q(taken_change_at__isnull=False, change_held_until__lt=now - STALE_CHANGE)
        ).count(),
        "push_channels_overdue": rows.filter(maintain_at__lt=now - STALE_MAINTENANCE).count(),
    }
    stuck = figures["push_changes_waiting"] or figures["push_channels_overdue"]
    detail = (
        f"{figures['push_live']} calendars on push, {figures['push_polling']} polled because "
        "push could not be set up or lapsed (the calendar connections' push column says why)"
    )
    if stuck:
        detail += (
            f"; {figures['push_changes_waiting']} notified calendars not re-synced for "
            f"{minutes} min and {figures['push_channels_overdue']} channels overdue: "
            f"{IS_THE_JOB_RUNNING}"
        )
    return not stuck, detail, figures
