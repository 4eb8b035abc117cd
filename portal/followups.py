"""Follow-ups as the website and the API change them: one set of rules for both.

Each function opens the user's scope itself and re-materialises the user
after a change, so a follow-up due soon is nudged without waiting for a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from calendars.models import FollowUp
from core.config import NudgeConfig
from scheduled_sends.materialize import refresh_queue
from tenancy.scope import tenant_scope

TITLE_MAX_CHARS = 200
# PostgreSQL bigint: a larger id in a URL is simply not found.
MAX_ID = 2**63 - 1


class FollowUpInvalid(ValueError):
    """A field's value is refused; ``field`` names it, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def clean_title(title: object) -> str:
    if not isinstance(title, str):
        raise FollowUpInvalid("title", "title must be a string")
    title = title.strip()
    if not title:
        raise FollowUpInvalid("title", "title must not be empty")
    if len(title) > TITLE_MAX_CHARS:
        raise FollowUpInvalid(
            "title", f"title is {len(title)} characters; the limit is {TITLE_MAX_CHARS}"
        )
    if any(ord(c) < 32 and c not in "\t" for c in title) or "\x00" in title:
        raise FollowUpInvalid("title", "title must not contain control characters")
    return title


def clean_due(due_at: datetime, now: datetime) -> datetime:
    if due_at.tzinfo is None or due_at.utcoffset() is None:
        raise FollowUpInvalid(
            "due_at", "due_at needs a UTC offset (e.g. 2026-12-24T18:00:00+01:00)"
        )
    if due_at <= now:
        raise FollowUpInvalid("due_at", "due_at is in the past")
    return due_at


@dataclass(frozen=True)
class FollowUpChange:
    title: str | None = None
    due_at: datetime | None = None
    done: bool | None = None


def list_follow_ups(user_id: int, *, done: bool | None = None, limit: int = 500) -> list[FollowUp]:
    with tenant_scope(user_id):
        rows = FollowUp.objects.filter(user_id=user_id)
        if done is not None:
            rows = rows.filter(done=done)
        return list(rows.order_by("done", "due_at", "pk")[:limit])


def get_follow_up(user_id: int, follow_up_id: int) -> FollowUp | None:
    if not 0 < follow_up_id <= MAX_ID:
        return None
    with tenant_scope(user_id):
        return FollowUp.objects.filter(user_id=user_id, pk=follow_up_id).first()


def _check_cap(user_id: int, cap: int) -> None:
    """At most ``NUDGE_MAX_FOLLOW_UPS_PER_USER`` follow-ups, done or not: every write
    and sweep of the user reads them. Inside the scope."""
    if FollowUp.objects.filter(user_id=user_id).count() >= cap:
        raise FollowUpInvalid(
            "", f"you have {cap} follow-ups, the most allowed; delete some to add more"
        )


def create_follow_up(
    user_id: int, title: str, due_at: datetime, now: datetime, config: NudgeConfig
) -> FollowUp:
    title, due_at = clean_title(title), clean_due(due_at, now)
    with tenant_scope(user_id):
        _check_cap(user_id, config.max_follow_ups_per_user)
        follow_up = FollowUp.objects.create(user_id=user_id, title=title, due_at=due_at)
    refresh_queue(user_id, now)
    return follow_up


def change_follow_up(
    user_id: int, follow_up_id: int, change: FollowUpChange, now: datetime
) -> FollowUp | None:
    """Apply ``change``; None when the user has no such follow-up."""
    title = clean_title(change.title) if change.title is not None else None
    due_at = clean_due(change.due_at, now) if change.due_at is not None else None
    if not 0 < follow_up_id <= MAX_ID:
        return None
    with tenant_scope(user_id):
        follow_up = FollowUp.objects.filter(user_id=user_id, pk=follow_up_id).first()
        if follow_up is None:
            return None
        if title is not None:
            follow_up.title = title
        if due_at is not None:
            follow_up.due_at = due_at
        if change.done is not None:
            follow_up.done = change.done
        follow_up.save()
    refresh_queue(user_id, now)
    return follow_up


def delete_follow_up(user_id: int, follow_up_id: int, now: datetime) -> bool:
    if not 0 < follow_up_id <= MAX_ID:
        return False
    with tenant_scope(user_id):
        deleted, _ = FollowUp.objects.filter(user_id=user_id, pk=follow_up_id).delete()
    if deleted:
        refresh_queue(user_id, now)
    return bool(deleted)


def as_json(follow_up: FollowUp) -> dict[str, Any]:
    return {
        "id": follow_up.pk,
        "title": follow_up.title,
        "due_at": follow_up.due_at.isoformat().replace("+00:00", "Z"),
        "done": follow_up.done,
        "created_at": follow_up.created_at.isoformat().replace("+00:00", "Z"),
    }
