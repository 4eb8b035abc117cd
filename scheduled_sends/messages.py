"""Compose the nudge's text in the recipient's time zone.

Plain text only: titles come from calendars anyone can invite you to, so
they are never given to a provider as markup. What is removed, and why:

* control characters (tabs, newlines, NUL, ESC, …) become spaces, and runs of
  whitespace fold to one — a title cannot add lines to the message;
* explicit bidirectional formatting (LRE/RLE/PDF/LRO/RLO and the isolates) is
  dropped: an unterminated right-to-left override in a title would otherwise
  reverse the rest of the message on screen, time included. Right-to-left
  text itself (Hebrew, Arabic) passes through untouched, as do emoji;
* lone surrogates, which cannot be encoded and would fail every send.

Long titles are cut at a word boundary when there is one in the second half,
and never inside a user-perceived character: not between a letter and its
combining marks, inside an emoji ZWJ sequence, before a skin-tone modifier or
variation selector, or between the two halves of a flag.

An unknown time zone (it passed validation once, or was written around it)
does not stop the nudge: the time is given in UTC and says so.
"""

from __future__ import annotations

import logging
import unicodedata
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo

from scheduled_sends.channels.base import NudgeMessage

logger = logging.getLogger("nudge.messages")

MAX_TITLE_CHARS = 120
ELLIPSIS = "…"

# Explicit directional embeddings, overrides and isolates (not the plain marks).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SPACE_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
ZWJ = "\u200d"


def _is_regional_indicator(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def _extends_previous(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (no boundary before it)."""
    return (
        unicodedata.category(char) in {"Mn", "Me", "Mc"}
        or char == ZWJ
        or "\ufe00" <= char <= "\ufe0f"  # variation selectors
        or "\U000e0100" <= char <= "\U000e01ef"
        or "\U0001f3fb" <= char <= "\U0001f3ff"  # skin-tone modifiers
        or "\U000e0020" <= char <= "\U000e007f"  # tag characters (subdivision flags)
    )


def _boundary_at_or_before(text: str, index: int) -> int:
    """The largest index <= ``index`` where ``text`` may be cut between characters."""
    while 0 < index < len(text) and (_extends_previous(text[index]) or text[index - 1] == ZWJ):
        index -= 1
    # Regional indicators pair up from the start of their run: keep whole flags.
    run = 0
    while run < index and _is_regional_indicator(text[index - 1 - run]):
        run += 1
    if run % 2 and index < len(text) and _is_regional_indicator(text[index]):
        index -= 1
    return index


def clean_title(title: str, fallback: str) -> str:
    """Plain, one-line, bounded text from an untrusted title (see the module docstring)."""
    visible = "".join(
        " " if unicodedata.category(char) in _SPACE_CATEGORIES else char
        for char in title
        if char not in BIDI_CONTROLS and unicodedata.category(char) != "Cs"
    )
    folded = " ".join(visible.split())
    if not folded:
        return fallback
    if len(folded) <= MAX_TITLE_CHARS:
        return folded
    cut_at = MAX_TITLE_CHARS - len(ELLIPSIS)
    space = folded.rfind(" ", 0, cut_at + 1)
    if space >= MAX_TITLE_CHARS // 2:
        cut_at = space
    cut_at = _boundary_at_or_before(folded, cut_at)
    return folded[:cut_at].rstrip() + ELLIPSIS


def describe_lead(delta: timedelta) -> str:
    minutes = max(0, round(delta.total_seconds() / 60))
    if minutes < 1:
        return "now"
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"in {minutes} min"
    return f"in {hours} h {minutes} min" if minutes else f"in {hours} h"


def _zone(tz_name: str) -> tuple[tzinfo, str]:
    """The user's zone and the label its times need ("" for a known zone)."""
    try:
        return zoneinfo.ZoneInfo(tz_name), ""
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        logger.warning(
            "unknown time zone on delivery settings; the nudge gives the time in UTC",
            extra={"tz_name": str(tz_name)[:64]},
        )
        return UTC, " UTC"


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
    tz, label = _zone(tz_name)
    local_start = starts_at.astimezone(tz)
    local_time = local_start.strftime("%H:%M")
    if local_start.date() != now.astimezone(tz).date():
        local_time = local_start.strftime("%a %H:%M")
    local_time += label
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
