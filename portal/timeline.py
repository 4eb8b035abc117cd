"""What the home page shows: the next nudges and the last days' outcomes with the person's
own Snooze and Done, read inside their scope (callers hold it). Anything not sent says why
in plain words (``portal.plain_words``), never the recorded reason."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext, gettext_lazy

from portal.plain_words import PlainWords, for_outcome
from scheduled_sends.models import Kind, NudgeAct, ScheduledSend
from scheduled_sends.queue.states import unsettled
from scheduled_sends.subjects import subject_titles

HISTORY_DAYS = 7
NOTHING_TO_SAY = PlainWords("")
STATUS_LABELS = {
    "planned": gettext_lazy("planned"),
    "due": gettext_lazy("due, not sent yet"),
    "sent": gettext_lazy("sent"),
    "skipped": gettext_lazy("skipped"),
    "failed": gettext_lazy("failed"),
    "expired": gettext_lazy("expired"),
    "snoozed": gettext_lazy("snoozed"),
    "done": gettext_lazy("done"),
}


@dataclass(frozen=True)
class Entry:
    title: str
    kind: str
    # Upcoming: when it is planned to go (None: at once — its time has come).
    # History: when it went (sent or skipped), else when it was meant to.
    at: datetime | None
    starts_at: datetime
    status: str  # "planned", "due" (its time passed, not sent yet), or an outcome word
    words: PlainWords = NOTHING_TO_SAY

    @property
    def pill(self) -> str:
        """The status in the user's language (``status`` stays the CSS class)."""
        return str(STATUS_LABELS.get(self.status, self.status))


def _entry(titles: dict, item: ScheduledSend | NudgeAct, **shown: Any) -> Entry:
    """An entry for a queue row or one of the person's acts (both name their subject)."""
    title = titles.get((item.kind, item.ref_id))
    if title is None:
        title = gettext_lazy("(deleted)")
    elif not title and item.kind == Kind.EVENT:
        title = gettext_lazy("(untitled event)")
    # What the page calls a row's subject ("follow-up at 15:00"), in the page's language.
    kind = gettext_lazy("follow-up") if item.kind == Kind.FOLLOW_UP else gettext_lazy("event")
    return Entry(title, kind, starts_at=item.subject_starts_at, **shown)


def upcoming(user_id: int, now: datetime, limit: int = 20) -> list[Entry]:
    rows = list(
        ScheduledSend.objects.filter(unsettled(), user_id=user_id)
        .filter(fire_at__gt=now - timedelta(minutes=30))
        .order_by("fire_at", "pk")[:limit]
    )
    titles = subject_titles(rows)
    # A follow-up due sooner than the lead is queued with a time already past: "due", not
    # "planned", it goes with the next deliver, which the page says as "now" (None).
    return [
        _entry(titles, row, at=row.fire_at, status="planned")
        if row.fire_at > now
        else _entry(titles, row, at=None, status="due")
        for row in rows
    ]


def _act_words(act: NudgeAct, time_format: str) -> PlainWords:
    """ "from Telegram"; a snooze says until when ("until Fri 09:00, from Telegram")."""
    via = act.get_via_display()
    if act.act != NudgeAct.Act.SNOOZE:
        return PlainWords(gettext("from %(via)s") % {"via": via})
    local = timezone.localtime(act.snoozed_until)
    until = date_format(local, time_format)
    if local.date() != timezone.localdate(act.created_at):
        until = f"{date_format(local, 'D')} {until}"  # the next day: say which
    return PlainWords(gettext("until %(time)s, from %(via)s") % {"time": until, "via": via})


def history(user_id: int, now: datetime, limit: int = 100, time_format: str = "H:i") -> list[Entry]:
    """Outcomes and the person's own acts (Snooze, Done) of the last days, newest first;
    times in the active zone, on the person's clock (``time_format``)."""
    since = now - timedelta(days=HISTORY_DAYS)
    rows = list(
        ScheduledSend.objects.filter(
            user_id=user_id, outcome__isnull=False, fire_at__gte=since
        ).order_by("-fire_at", "-pk")[:limit]
    )
    acts = list(
        NudgeAct.objects.filter(user_id=user_id, created_at__gte=since).order_by(
            "-created_at", "-pk"
        )[:limit]
    )
    titles = subject_titles([*rows, *acts])
    entries = [
        _entry(
            titles,
            row,
            at=row.sent_at or row.fire_at,  # when it went, else when it was meant to
            status=row.outcome,
            words=for_outcome(row.outcome, row.failure_kind, row.last_error),
        )
        for row in rows
    ] + [
        _entry(
            titles,
            act,
            at=act.created_at,
            status="snoozed" if act.act == NudgeAct.Act.SNOOZE else "done",
            words=_act_words(act, time_format),
        )
        for act in acts
    ]
    return sorted(entries, key=lambda entry: entry.at or now, reverse=True)[:limit]
