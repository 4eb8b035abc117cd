"""The minute job's to-do list (``calendar_push_work``): what to look at, and when.

Rows are keyed by connection. A verified notification sets ``changed_at``
only where it is empty, so a flood of notifications is one row and one sync;
the minute job takes the row (clearing ``changed_at``) *before* it fetches,
so a change notified during the fetch marks it again for the next minute.
``maintain_at`` says when the connection's channel must be created, renewed
or retried. Taking work locks rows with SKIP LOCKED, so two overlapping
minute jobs never do the same row twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from calendars.models import PushWork

# A channel taken for maintenance is not offered again for this long (its job
# is doing it, or died doing it).
MAINTENANCE_LEASE = timedelta(minutes=10)
# Per minute job; more waits for the next minute.
TAKE_LIMIT = 5000


@dataclass(frozen=True)
class Work:
    connection_id: int
    user_id: int


def enroll(connection_id: int, user_id: int, now: datetime) -> None:
    """A Google or Graph connection is due a channel now (connected, or reconnected)."""
    PushWork.objects.update_or_create(
        connection_id=connection_id, defaults={"user_id": user_id, "maintain_at": now}
    )


def mark_changed(connection_id: int, now: datetime) -> bool:
    """Record that the provider says the connection changed; False if it was already marked."""
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


def take_changed(limit: int = TAKE_LIMIT) -> list[Work]:
    """The notified connections, oldest first, their marks cleared."""
    with transaction.atomic():
        rows = list(
            PushWork.objects.select_for_update(skip_locked=True)
            .filter(changed_at__isnull=False)
            .order_by("changed_at")
            .values_list("connection_id", "user_id")[:limit]
        )
        PushWork.objects.filter(connection_id__in=[cid for cid, _ in rows]).update(changed_at=None)
    return [Work(cid, uid) for cid, uid in rows]


def take_maintenance(now: datetime, limit: int = TAKE_LIMIT) -> list[Work]:
    """Connections whose channel is due now, leased for :data:`MAINTENANCE_LEASE`."""
    with transaction.atomic():
        rows = list(
            PushWork.objects.select_for_update(skip_locked=True)
            .filter(maintain_at__lte=now)
            .order_by("maintain_at")
            .values_list("connection_id", "user_id")[:limit]
        )
        PushWork.objects.filter(connection_id__in=[cid for cid, _ in rows]).update(
            maintain_at=now + MAINTENANCE_LEASE
        )
    return [Work(cid, uid) for cid, uid in rows]


# A mark or a due channel older than this means the minute job is not running.
STALE_CHANGE = timedelta(minutes=5)
STALE_MAINTENANCE = MAINTENANCE_LEASE + timedelta(minutes=5)


@dataclass(frozen=True)
class PushHealth:
    ok: bool
    detail: str
    figures: dict[str, int]


def push_health(now: datetime, push_configured: bool) -> PushHealth:
    """Push as health sees it, from the work list alone (no tenant rows are read)."""
    if not push_configured:
        return PushHealth(
            True, "push is not configured (CALENDAR_PUSH_BASE_URL): every calendar is polled", {}
        )
    rows = PushWork.objects
    figures = {
        "push_live": rows.filter(polling=False).count(),
        "push_polling": rows.filter(polling=True).count(),
        "push_changes_waiting": rows.filter(changed_at__lt=now - STALE_CHANGE).count(),
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
            f"{STALE_CHANGE.seconds // 60} min and {figures['push_channels_overdue']} channels "
            "overdue: is `manage.py sync_changed` running every minute?"
        )
    return PushHealth(not stuck, detail, figures)
