"""How a queue row reads on the console's pages: its instant, owner and subject."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.http import HttpRequest
from django.utils.text import Truncator

from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue.transitions import database_now
from scheduled_sends.subjects import subject_titles


def as_of(request: HttpRequest) -> datetime:
    """One instant per request, on the database's clock: the clock the transitions'
    fences judge rows by."""
    if "_nudge_as_of" not in request.__dict__:
        request.__dict__["_nudge_as_of"] = database_now()
    return request.__dict__["_nudge_as_of"]


def attach_subject_titles(rows: Iterable[ScheduledSend]) -> None:
    """Set ``subject_title`` on each row (None when the subject is gone), in one query."""
    rows = list(rows)
    titles = subject_titles(rows)
    for row in rows:
        row.subject_title = titles.get((row.kind, row.ref_id))


def subject_label(obj: ScheduledSend) -> str:
    """The subject's title as support reads it, or what is known of a gone one."""
    title = getattr(obj, "subject_title", None)
    if title is None:
        return f"(gone: {obj.get_kind_display().lower()} #{obj.ref_id})"
    return Truncator(title or "(untitled)").chars(60)
