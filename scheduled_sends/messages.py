"""Compose the nudge's text in the recipient's time zone.

Plain text only: titles come from calendars anyone can invite you to, so
they are never given to a provider as markup. Control characters are
dropped and long titles are cut at a word boundary; emoji and right-to-left
text pass through untouched.
"""

from __future__ import annotations

import unicodedata
import zoneinfo
from datetime import datetime, timedelta

from scheduled_sends.channels.base import NudgeMessage

MAX_TITLE_CHARS = 120
ELLIPSIS = "…"


def clean_title(title: str, fallback: str) -> str:
    """Drop control characters, fold whitespace, and cut long titles sensibly."""
    visible = "".join(
        " " if unicodedata.category(char) in {"Cc", "Zl", "Zp"} else char for char in title
    )
    folded = " ".join(visible.split())
    if not folded:
        return fallback
    if len(folded) <= MAX_TITLE_CHARS:
        return folded
    cut = folded[: MAX_TITLE_CHARS - 1]
    space = cut.rfind(" ")
    if space >= MAX_TITLE_CHARS // 2:
        cut = cut[:space]
    # Never end on half of a combining sequence or a lone joiner.
    while cut and unicodedata.category(cut[-1]) in {"Mn", "Me", "Cf"}:
        cut = cut[:-1]
    return cut.rstrip() + ELLIPSIS


def describe_lead(delta: timedelta) -> str:
    minutes = max(0, round(delta.total_seconds() / 60))
    if minutes < 1:
        return "now"
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"in {minutes} min"
    return f"in {hours} h {minutes} min" if minutes else f"in {hours} h"


def compose(
    *,
    kind: str,
    title: str,
    starts_at: datetime,
    now: datetime,
    tz_name: str,
    valid_until: datetime,
) -> NudgeMessage:
    """'Design review starts at 15:00 (in 10 min)', in the user's zone."""
    tz = zoneinfo.ZoneInfo(tz_name)
    local_start = starts_at.astimezone(tz)
    local_time = local_start.strftime("%H:%M")
    if local_start.date() != now.astimezone(tz).date():
        local_time = local_start.strftime("%a %H:%M")
    lead = describe_lead(starts_at - now)
    if kind == "follow_up":
        clean = clean_title(title, "your follow-up")
        text = f"Reminder: {clean} is due at {local_time} ({lead})"
    else:
        clean = clean_title(title, "Your event")
        text = f"{clean} starts at {local_time} ({lead})"
    return NudgeMessage(
        text=text,
        title=clean,
        local_time=local_time,
        minutes_until=max(0, round((starts_at - now).total_seconds() / 60)),
        valid_for_seconds=max(1, int((valid_until - now).total_seconds())),
    )
