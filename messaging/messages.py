"""A nudge's plain text in the recipient's zone (UTC, said so, for an unknown one),
language and clock. Anyone can invite you, so :func:`clean_title` makes a title one
bounded line and defangs an event's addresses: its one link is a vetted join link.
``docs/MESSAGES.md`` shows every shape.
"""

from __future__ import annotations

import logging
import re
import unicodedata
import zoneinfo
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from enum import StrEnum
from functools import lru_cache
from typing import Any

import regex
from babel import Locale
from babel.dates import format_skeleton, format_timedelta
from django.conf import settings
from django.utils import translation
from django.utils.translation import trans_real  # cached catalogs: activating per nudge costs more

from messaging.channels.base import NudgeMessage
from providers.meeting_links import without_links

logger = logging.getLogger("nudge.messages")

MAX_TITLE_CHARS = 120
ELLIPSIS = "…"

# Explicit directional embeddings, overrides and isolates (not the plain marks).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SPACE_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
# A user-perceived character: a flag, an emoji sequence, a letter with its marks.
_GRAPHEME = regex.compile(r"\X")


def _boundary_at_or_before(text: str, index: int) -> int:
    """The largest index <= ``index`` where ``text`` may be cut between characters."""
    end = 0
    for grapheme in _GRAPHEME.finditer(text):
        if grapheme.end() > index:
            break
        end = grapheme.end()
    return end


# Characters an app skips inside an address (soft hyphen, zero-width characters,
# invisible operators, BOM): an address with one in it is still an address.
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff"
# A scheme ("https://", "tg://"): dropped, so no app sees a URL's start.
_SCHEME = re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://", re.IGNORECASE)
# A dot of a host name: ASCII or one of the dots IDNA reads as one.
_HOST_DOT = f"[{_INVISIBLE}]*[.\u3002\uff0e\uff61][{_INVISIBLE}]*"
_LABEL = rf"[^\W_](?:[\w{_INVISIBLE}-]{{0,62}}[^\W_])?"
# A host: labels, then a top-level name of two or more letters (or an IDNA "xn--"
# one) not running on into a letter or digit; or an IPv4 address.
_HOST = re.compile(
    rf"(?:{_LABEL}{_HOST_DOT})+(?:xn--[a-z0-9-]+|[^\W\d_]{{2,63}})(?![^\W_])"
    rf"|(?<![\w.])\d{{1,3}}(?:{_HOST_DOT}\d{{1,3}}){{3}}(?![^\W_])",
    re.IGNORECASE,
)
_DOTS = re.compile(_HOST_DOT)
_ANY_DOT = re.compile("[.\u3002\uff0e\uff61]")
DEFANGED_DOT = "[.]"


def neutralise_links(text: str) -> str:
    """``text`` with no address an app would make a link: each scheme dropped, each
    dot of a host name written "[.]" ("https://evil.example/login" reads
    "evil[.]example/login"). A dot before a word of two or more letters is taken for
    a host's ("Node[.]js" too: a stray bracket costs less than a link); "4.2" is not."""
    if not _ANY_DOT.search(text) and "://" not in text:
        return text  # most titles: nothing to scan for
    without_schemes = _SCHEME.sub("", text)
    return _HOST.sub(lambda host: _DOTS.sub(DEFANGED_DOT, host.group()), without_schemes)


def clean_title(title: str, fallback: str, *, from_a_stranger: bool = False) -> str:
    """One plain bounded line: no control characters, no bidi formatting (an open override
    reverses the rest), no lone surrogates (they fail every send), cut at a word and never
    inside a character; ``from_a_stranger`` (an event's title or place): defanged."""
    visible = "".join(
        " " if unicodedata.category(char) in _SPACE_CATEGORIES else char
        for char in title
        if char not in BIDI_CONTROLS and unicodedata.category(char) != "Cs"
    )
    folded = " ".join(visible.split())
    if from_a_stranger:
        # After the drops above (a dropped override cannot join an address back
        # together), before the cut, and only on what the cut can keep.
        folded = neutralise_links(folded[: 2 * MAX_TITLE_CHARS])
    if not folded:
        return fallback
    return shorten(folded, MAX_TITLE_CHARS)


def shorten(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: cut, with an ellipsis, at a space in its
    second half, else between two user-perceived characters (never inside an emoji)."""
    if len(text) <= limit:
        return text
    cut_at = limit - len(ELLIPSIS)
    space = text.rfind(" ", 0, cut_at + 1)
    if space >= limit // 2:
        cut_at = space
    cut_at = _boundary_at_or_before(text, cut_at)
    return text[:cut_at].rstrip() + ELLIPSIS


def _reader(tz_name: str, language: str) -> tuple[tzinfo, str, str]:
    """The reader's zone, the label its times need ("" for a known zone), and their
    language (English for one not in ``LANGUAGES``)."""
    language = language if language in LANGUAGES else "en"
    try:
        return zoneinfo.ZoneInfo(tz_name), "", language
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        logger.warning(
            "unknown time zone on delivery settings; the nudge gives the time in UTC",
            extra={"tz_name": str(tz_name)[:64]},
        )
        return UTC, " UTC", language


class Shape(StrEnum):
    """Why this nudge is sent, when that changes its words."""

    REMINDER = "reminder"
    SNOOZED = "snoozed"
    QUIET_HOURS = "quiet_hours"


LANGUAGES = tuple(code for code, _name in settings.LANGUAGES)


def describe_lead(delta: timedelta, language: str) -> str:
    """'in 10 min', 'in 2 h 5 min' or 'now' in ``language``; a day or more ahead
    (only a snoozed or hand-made nudge is) as the locale says it ('in 3 days')."""
    words = trans_real.translation(language)
    minutes = max(0, round(delta.total_seconds() / 60))
    if minutes < 1:
        return words.gettext("now")
    if minutes >= 24 * 60:
        return format_timedelta(delta, add_direction=True, locale=_locale(language))
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return words.gettext("in %(minutes)d min") % {"minutes": minutes}
    if not minutes:
        return words.gettext("in %(hours)d h") % {"hours": hours}
    return words.gettext("in %(hours)d h %(minutes)d min") % {"hours": hours, "minutes": minutes}


@lru_cache(maxsize=16)
def _locale(language: str) -> Locale:
    """One of ``LANGUAGES`` (``_reader`` made sure) as babel's locale."""
    return Locale.parse(translation.to_locale(language))


def _format(moment: datetime, language: str, skeleton: str) -> str:
    """``moment`` by the locale's pattern for a skeleton ("Hm", "hm", "E", "MMMEd")."""
    return format_skeleton(skeleton, moment, locale=_locale(language))


def _time_text(local: datetime, language: str, clock: str) -> str:
    """A local time on the person's clock ("24h" or "12h"): '15:05', '3:05 PM'."""
    return _format(local, language, "hm" if clock == "12h" else "Hm")


def clock_text(reader: Any, instant: datetime, now: datetime) -> str:
    """A time as the reader (their ``DeliverySettings``) reads it — zone, language and
    clock — with the weekday when it is not today: '15:05', '3:05 PM', 'Fr. 15:05'."""
    zone, _label, language = _reader(reader.timezone, reader.language)
    local = instant.astimezone(zone)
    time_text = _time_text(local, language, reader.clock)
    if local.date() != now.astimezone(zone).date():
        return f"{_format(local, language, 'E')} {time_text}"
    return time_text


def _one_oclock(local: datetime, clock: str) -> bool:
    """Whether ``local`` reads one o'clock on ``clock``: Spanish and Portuguese say
    'a la 1:30', 'à 1:30' (one) but 'a las 13:30', 'às 13:30'."""
    return (local.hour % 12 if clock == "12h" else local.hour) == 1


def _when(
    local_start: datetime, local_now: datetime, language: str, time_text: str, one: bool = False
) -> tuple[str, str]:
    """(the phrase after "starts", the day and time alone) in ``language``; ``one``: the
    time reads one o'clock (``_one_oclock``)."""
    words = trans_real.translation(language)
    days_ahead = (local_start.date() - local_now.date()).days
    if days_ahead == 0:
        at = words.pgettext("one o'clock", "at %(time)s") if one else words.gettext("at %(time)s")
        return at % {"time": time_text}, time_text
    if days_ahead == 1:
        tomorrow = words.pgettext("day", "tomorrow")
        at = (
            words.pgettext("one o'clock", "tomorrow at %(time)s")
            if one
            else words.gettext("tomorrow at %(time)s")
        )
        return at % {"time": time_text}, f"{tomorrow} {time_text}"
    skeleton = "MMMEd" if local_start.year == local_now.year else "yMMMEd"
    date_text = _format(local_start, language, skeleton)
    at = (
        words.pgettext("one o'clock", "on %(date)s at %(time)s")
        if one
        else words.gettext("on %(date)s at %(time)s")
    )
    return at % {"date": date_text, "time": time_text}, f"{date_text} {time_text}"


def when_text(reader: Any, instant: datetime, now: datetime) -> str:
    """'at 15:10', 'tomorrow at 3:10 PM', 'on Fri, Dec 10 at 15:10': when something is, as
    the reader's (their ``DeliverySettings``') zone, language and clock write it."""
    tz, label, language = _reader(reader.timezone, reader.language)
    local = instant.astimezone(tz)
    time_text = _time_text(local, language, reader.clock)
    one = _one_oclock(local, reader.clock)
    return _when(local, now.astimezone(tz), language, time_text, one)[0] + label


def all_day_text(reader: Any, instant: datetime, now: datetime) -> str:
    """'all day', 'tomorrow all day', 'Fri, Dec 10 all day': when an all-day item is, in
    the morning agenda's words, where a timed one reads :func:`when_text`."""
    tz, _label, language = _reader(reader.timezone, reader.language)
    all_day = trans_real.translation(language).gettext("all day")
    return _when(instant.astimezone(tz), now.astimezone(tz), language, all_day)[1]


def _subject_title(words: Any, kind: str, title: str) -> str:
    """A follow-up's title (the person's own words) or an event's (a stranger's: defanged)."""
    if kind == "follow_up":
        return clean_title(title, words.gettext("your follow-up"))
    return clean_title(title, words.gettext("Your event"), from_a_stranger=True)


def compose(
    *,
    kind: str,
    title: str,
    starts_at: datetime,
    now: datetime,
    tz_name: str,
    valid_until: datetime,
    language: str = "en",
    clock: str = "24h",
    join_url: str = "",
    location: str = "",
    shape: Shape = Shape.REMINDER,
) -> NudgeMessage:
    """'Design review starts at 15:00 (in 10 min)', then the join link or else the location.
    ``kind`` is "event" or "follow_up" (the person's own title, not defanged)."""
    tz, label, language = _reader(tz_name, language)
    words = trans_real.translation(language)
    local_start = starts_at.astimezone(tz)
    time_text = _time_text(local_start, language, clock)
    one = _one_oclock(local_start, clock)
    when, local_time = _when(local_start, now.astimezone(tz), language, time_text, one)
    minutes_until = max(0, round((starts_at - now).total_seconds() / 60))
    minutes_late = round((now - starts_at).total_seconds() / 60)
    clean = _subject_title(words, kind, title)
    values = {
        "title": clean,
        "when": when + label,
        "time": time_text + label,
        "lead": describe_lead(starts_at - now, language),
    }
    if kind == "follow_up":
        if minutes_until < 1:
            text = words.gettext("%(title)s is due now (%(time)s)") % values
        else:
            text = words.gettext("%(title)s is due %(when)s (%(lead)s)") % values
    elif minutes_late >= 1:
        # A nudge for the start itself, sent late (within grace): it has begun.
        values["ago"] = words.gettext("%(minutes)d min ago") % {"minutes": minutes_late}
        text = words.gettext("%(title)s started %(when)s (%(ago)s)") % values
    elif minutes_until < 1:
        text = words.gettext("%(title)s starts now (%(time)s)") % values
    else:
        text = words.gettext("%(title)s starts %(when)s (%(lead)s)") % values
    if shape == Shape.SNOOZED:
        text = words.gettext("Snoozed: %(text)s") % {"text": text}
    elif kind == "follow_up":
        text = words.gettext("Reminder: %(text)s") % {"text": text}
    if shape == Shape.QUIET_HOURS:
        text = words.gettext("%(text)s · held for your quiet hours") % {"text": text}
    second_line = join_url or clean_title(without_links(location), "", from_a_stranger=True)
    if second_line:
        text = f"{text}\n{second_line}"
    return NudgeMessage(
        text=text,
        title=clean,
        local_time=local_time + label,
        minutes_until=minutes_until,
        valid_for_seconds=max(1, int((valid_until - now).total_seconds())),
        join_url=join_url,
        language=language,
    )


# WhatsApp's limit less room for the last line: a longer day is cut, and says so.
AGENDA_MAX_CHARS = 1500
# Of an event's title on its Join button: a phone shows about this much of one.
JOIN_LABEL_TITLE_CHARS = 40


def one_message(
    head: str, lines: Sequence[str], gettext: Callable[[str], str]
) -> tuple[list[str], int]:
    """``head`` and as many of ``lines`` as fit one WhatsApp message (``AGENDA_MAX_CHARS``,
    joined by newlines), the rest said as "… and N more"; with how many lines were kept.
    WhatsApp refuses a longer message whole."""
    kept, used = [head], len(head) + 1
    for shown, line in enumerate(lines):
        more = gettext("… and %(count)d more") % {"count": len(lines) - shown}
        if used + len(line) + len(more) > AGENDA_MAX_CHARS:
            return [*kept, more], shown
        kept.append(line)
        used += len(line) + 1
    return kept, len(lines)


def compose_agenda(
    items: Sequence[Any],
    *,
    day: date,
    now: datetime,
    tz_name: str,
    valid_until: datetime,
    language: str = "en",
    clock: str = "24h",
) -> NudgeMessage:
    """The morning agenda: 'Your day, Fri, Dec 4:' then a line per ``day.Item`` (its time
    and title, an event's join link below it, and as a Join button where there are any)."""
    tz, label, language = _reader(tz_name, language)
    words = trans_real.translation(language)
    day_text = _format(datetime.combine(day, time(12), tzinfo=tz), language, "MMMEd")
    head = words.gettext("Your day, %(date)s:") % {"date": day_text}
    titles, item_lines = [], []
    for item in items:
        title = _subject_title(words, item.kind, item.title)
        when = (
            words.gettext("all day")
            if item.all_day
            else _time_text(item.starts_at.astimezone(tz), language, clock) + label
        )
        titles.append(title)
        item_lines.append(f"• {when} {title}" + (f"\n  {item.join_url}" if item.join_url else ""))
    lines, shown = one_message(head, item_lines, words.gettext)
    links = [
        (f"{words.gettext('Join')}: {shorten(title, JOIN_LABEL_TITLE_CHARS)}", item.join_url)
        for item, title in zip(items[:shown], titles[:shown], strict=True)
        if item.join_url
    ]
    first = items[0].starts_at if items else now
    return NudgeMessage(
        text="\n".join(lines),
        title=head.rstrip(":").rstrip(),  # French writes "… :"
        local_time=_time_text(first.astimezone(tz), language, clock) + label,
        minutes_until=max(0, round((first - now).total_seconds() / 60)),
        valid_for_seconds=max(1, int((valid_until - now).total_seconds())),
        language=language,
        links=tuple(links[:8]),
    )
