"""What the home page shows: the next nudges from the queue and the last days' outcomes.

Both read the user's own queue rows inside their scope (callers hold it) and
phrase each row the way a person asks about it: what, when in their zone,
and — for anything not sent — why, in the words delivery recorded (a failure's
words composed from its kind, ``scheduled_sends/failures.py``).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from scheduled_sends.failures import history_reason
from scheduled_sends.models import Kind, Outcome, ScheduledSend
from scheduled_sends.queue.states import unsettled
from scheduled_sends.subjects import subject_titles

HISTORY_DAYS = 7
OUTCOME_WORDS = {
    Outcome.SENT: "sent",
    Outcome.SKIPPED: "skipped",
    Outcome.FAILED: "failed",
    Outcome.EXPIRED: "expired",
}


@dataclass(frozen=True)
class Entry:
    send_id: int
    title: str
    kind: str
    at: datetime  # planned send time (upcoming) or when it was due to go (history)
    starts_at: datetime
    status: str  # "planned", "due" (its time passed, not sent yet), or an outcome word
    reason: str = ""

    def describe(self) -> str:
        if self.status == "due":
            return "due, not sent yet"
        if self.status in ("planned", "sent"):
            return self.status
        return f"{self.status}: {self.reason}" if self.reason else self.status


def zone_of(name: str) -> tzinfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return UTC


def _title(titles: dict[tuple[str, int], str], row: ScheduledSend) -> str:
    title = titles.get((row.kind, row.ref_id))
    if title is None:
        return "(deleted)"
    return title or ("(untitled event)" if row.kind == Kind.EVENT else "")


def _entries(rows: list[ScheduledSend], planned: bool, now: datetime | None = None) -> list[Entry]:
    titles = subject_titles(rows)
    entries = []
    for row in rows:
        reason = history_reason(row.outcome, row.failure_kind, row.last_error)
        entries.append(
            Entry(
                send_id=row.pk,
                title=_title(titles, row),
                kind="follow-up" if row.kind == Kind.FOLLOW_UP else "event",
                at=row.fire_at,
                starts_at=row.subject_starts_at,
                status=_upcoming_status(row, now)
                if planned
                else OUTCOME_WORDS.get(row.outcome, row.outcome),
                reason="" if planned or row.outcome == Outcome.SENT else reason,
            )
        )
    return entries


def _upcoming_status(row: ScheduledSend, now: datetime | None) -> str:
    """A time already passed is not "planned": deliver has not sent it yet."""
    return "due" if now is not None and row.fire_at <= now else "planned"


def upcoming(user_id: int, now: datetime, limit: int = 20) -> list[Entry]:
    rows = list(
        ScheduledSend.objects.filter(unsettled(), user_id=user_id)
        .filter(fire_at__gt=now - timedelta(minutes=30))
        .order_by("fire_at", "pk")[:limit]
    )
    return _entries(rows, planned=True, now=now)


def history(user_id: int, now: datetime, limit: int = 100) -> list[Entry]:
    rows = list(
        ScheduledSend.objects.filter(
            user_id=user_id,
            outcome__isnull=False,
            fire_at__gte=now - timedelta(days=HISTORY_DAYS),
        ).order_by("-fire_at", "-pk")[:limit]
    )
    return _entries(rows, planned=False)
