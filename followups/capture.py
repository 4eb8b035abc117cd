"""Reading a follow-up typed in a chat ("remind me tomorrow at 9 to call Anna", "morgen
um 9 Anna anrufen") in the five languages: pure, and never a silent guess (an AskBack).

The clock time and the day are read here (dateparser alone reads "tomorrow at 9" as
tomorrow at this hour); relative spans ("in 2 hours") go to ``dateparser``, imported on
first use so the delivery path never loads it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from babel import Locale

from core.zones import zone_of

# settings.LANGUAGES' codes, as dateparser names them.
PARSER_LANGUAGES = {"en": "en", "de": "de", "es": "es", "fr": "fr", "pt-br": "pt"}
# Offered when a day is given without a time.
DAY_CHOICES = (time(9, 0), time(14, 0), time(18, 0))


@dataclass(frozen=True)
class Captured:
    title: str  # "" when none was given
    due_at: datetime


@dataclass(frozen=True)
class AskBack:
    """The text has more than one reading (or a day and no time): the person picks."""

    title: str
    choices: tuple[datetime, ...]


@dataclass(frozen=True)
class NoTime:
    """It asked for a reminder ("remind me to …") and said no time."""


def fold(text: str) -> str:
    """Lower case without accents, one character for one (indices stay valid)."""
    return "".join((unicodedata.normalize("NFKD", c.lower())[:1] or c) for c in text)


_LEAD_IN = re.compile(
    r"^\s*(?:/remind\b|remind me(?: to| about| that)?|reminder:?|"
    r"erinnere? mich(?: daran)?(?:,? dass| an)?|erinnerung:?|"
    r"recuerdame(?: que| de)?|recordatorio:?|"
    r"rappelle[- ]moi(?: de| d'| que)?|rappel ?:?|"
    r"(?:me )?lembre(?:-me)?(?: de| que)?|lembra-me(?: de)?|lembrete:?)(?=\s|$)"
)
_RELATIVE = re.compile(
    r"\b(?:in|en|dans|em)\s+(?:(\d{1,3})|an?|one|einer?|un[ae]?|uma?)\s+"
    r"(?:minutes?|mins?|minuten?|minutos?|hours?|hrs?|h|stunden?|horas?|heures?|"
    r"(?P<days>days?|tagen?|dias?|jours?|weeks?|wochen?|semanas?|semaines?))\b"
)
_PM_WORDS = (
    r"pm|p\.m\.|in the evening|in the afternoon|tonight|abends|nachmittags|"
    r"de la tarde|de la noche|du soir|de l'apres-midi|da tarde|da noite"
)
_AM_WORDS = r"am|a\.m\.|in the morning|morgens|fruh|de la manana|du matin|da manha"
_TIME = re.compile(
    r"(?<![\w:./-])(?:(?P<prep>at|um|gegen|a las|a la|a|as|vers|@)\s+)?"
    r"(?P<h>\d{1,2})(?:(?P<sep>[:h.])(?P<m>\d{2})?)?"
    rf"(?:\s*(?P<uhr>uhr|h)\b)?(?:\s*(?P<half>{_PM_WORDS}|{_AM_WORDS})(?!\w))?(?![\w:/])"
)
# A part of the day said apart from the hour ("morgen Abend um 8", "tonight at 8",
# "demain après-midi à 3h"): afternoon and evening ones make it pm, morning ones am.
_DAY_PARTS = re.compile(
    r"\b(?:(?P<pm>tonight|(?:this |in the )?(?:evening|afternoon)|abends?|nachmittags?|"
    r"(?:esta|por la|de la) (?:noche|tarde)|(?:ce |du |de l')?(?:soir|apres-midi)|"
    r"(?:esta|a|de|da|pela) (?:noite|tarde))|"
    r"(?P<am>(?:this |in the )?morning|vormittags?|(?:esta|por la|de la) manana|"
    r"(?:ce |du )?matin|(?:esta|de|da|pela) manha))\b"
)
_NOON = re.compile(
    r"\b(?:at |around |um |gegen |al |a |vers |ao |as )?"
    r"(?:noon|midday|mittag|mediodia|midi|meio-dia)\b"
)
_DAY_WORDS = {
    2: r"the day after tomorrow|day after tomorrow|ubermorgen|pasado manana|apres-demain|"
    r"depois de amanha",
    0: r"today|heute|hoy|aujourd'hui|hoje",
    1: r"tomorrow|morgen|manana|demain|amanha",
}
_NEXT_BEFORE = (
    r"next|nachsten|nachster|naechsten|kommenden|el proximo|proximo|la proxima|"
    r"proxima|o proximo|a proxima"
)
_NEXT_AFTER = r"prochain|que vem|proximo|proxima"
_DAY_PREP = r"(?:(?:on|am|el|le|na|no|this|diesen|este|esta|ce|nesta|neste)\s+)?"
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_NUMERIC = re.compile(
    r"(?<![\w.:/])(?:(?:am|on|the|el|le|em|no|dia|den)\s+)?(\d{1,2})[./](\d{1,2})(?:[./](\d{4}|\d{2}))?\.?(?![\w:/])"
)
# The title's leading connectors and punctuation, however many ("to: call Anna").
_CONNECTORS = re.compile(
    r"^(?:(?:to|about|that|zu|dass|an|que|de|d'|para|pour|a|,|-|:)\s+|d'|[ ,.;:-])+",
    re.IGNORECASE,
)


@lru_cache(maxsize=1)
def _names() -> tuple[dict[str, int], dict[str, int]]:
    """Weekday names (Monday 0) and month names (January 1) in the five languages,
    folded, from Babel's locale data; Portuguese "sexta" for "sexta-feira"."""
    weekdays: dict[str, int] = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thurs": 3}
    weekdays["fri"] = 4
    months: dict[str, int] = {}
    for language in PARSER_LANGUAGES.values():
        locale = Locale.parse(language)
        for number, name in locale.days["format"]["wide"].items():
            weekdays[fold(name)] = number  # Babel: Monday 0
            if name.endswith("-feira"):
                weekdays[fold(name.removesuffix("-feira"))] = number
        for width in ("wide", "abbreviated"):
            for number, name in locale.months["format"][width].items():
                name = fold(name).rstrip(".")
                if len(name) >= 3:
                    months[name] = number
    return weekdays, months


def _alternatives(words) -> str:
    return "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))


@lru_cache(maxsize=1)
def _day_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    weekdays, months = _names()
    weekday = _alternatives(weekdays)
    month = _alternatives(months)
    weekday_re = re.compile(
        rf"\b{_DAY_PREP}(?:(?P<next>{_NEXT_BEFORE})\s+)?(?P<day>{weekday})\b"
        rf"(?:\s+(?P<after>{_NEXT_AFTER})\b)?"
    )
    month_re = re.compile(
        rf"\b(?:(?:on|am|el|le|em|no|dia)\s+)?(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th|\.|º|er)?\s*"
        rf"(?:de\s+)?(?P<m1>{month})\.?|(?P<m2>{month})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?)"
        rf"(?:,?\s+(?P<y>\d{{4}}))?\b"
    )
    return weekday_re, month_re


def _dateparser_parse(text: str, language: str, zone: ZoneInfo, now: datetime) -> datetime | None:
    """dateparser's reading of a span, relative to ``now`` on the person's wall clock."""
    import dateparser  # here, not at the top: the delivery path never loads it

    return dateparser.parse(
        text,
        languages=[PARSER_LANGUAGES.get(language, "en"), "en"],
        settings={
            "PREFER_DATES_FROM": "future",
            "RELATIVE_BASE": now.astimezone(zone).replace(tzinfo=None),
            "TIMEZONE": zone.key,
            "RETURN_AS_TIMEZONE_AWARE": True,
        },
    )


class _Text:
    """The folded text with the spans read so far blanked out (indices kept)."""

    def __init__(self, original: str) -> None:
        self.original = original
        self.work = fold(original)

    def span_of(self, match: re.Match[str]) -> str:
        return self.original[match.start() : match.end()]

    def take(self, match: re.Match[str], end: int | None = None) -> None:
        start, end = match.start(), match.end() if end is None else end
        self.work = self.work[:start] + " " * (end - start) + self.work[end:]

    def title(self) -> str:
        kept = "".join(
            o if w != " " else " " for o, w in zip(self.original, self.work, strict=True)
        )
        words = " ".join(kept.split()).strip(" ,.;:-")
        return _CONNECTORS.sub("", words, count=1)


@dataclass
class _Clock:
    hour: int
    minute: int
    settled: bool  # am/pm, a leading zero or an hour past 12: one reading


def _read_clock(text: _Text, alone: bool = False) -> _Clock | None:
    part, before = _DAY_PARTS.search(text.work), text.work
    if part is not None:
        text.take(part)  # before noon's words: "midi" in "après-midi" is not noon
    clock = _read_hour(text, alone)
    if clock is None:
        text.work = before  # "tomorrow evening dinner": the title keeps its words
    elif part is not None and not clock.settled and clock.hour < 12:
        clock.hour += 12 if part["pm"] else 0
        clock.settled = True
    return clock


def _read_hour(text: _Text, alone: bool = False) -> _Clock | None:
    """The hour written, else a noon word: "um 13 Uhr Mittag mit Tom" is at 13:00, and
    "Mittag" stays in the title. A number ``alone`` (the whole text) is an hour too."""
    for match in _TIME.finditer(text.work):
        prep, sep, uhr, half = match["prep"], match["sep"], match["uhr"], match["half"]
        if not (alone or prep or sep in (":", "h") or uhr or half or (sep == "." and prep)):
            continue
        hour, minute = int(match["h"]), int(match["m"] or 0)
        if sep == "." and not match["m"]:
            continue  # "10." is a day of a date, not an hour
        if hour > 23 or minute > 59:
            continue
        settled = hour == 0 or hour > 12 or match["h"].startswith("0")
        end = None
        if half and not 1 <= hour <= 12:
            half, end = None, match.start("half")  # "um 21 am Freitag": "am" is "on"
        if half:
            is_pm = re.fullmatch(_PM_WORDS, half) is not None
            hour = (hour % 12) + (12 if is_pm else 0)
            settled = True
        text.take(match, end)
        return _Clock(hour, minute, settled)
    noon = _NOON.search(text.work)
    if noon is not None:
        text.take(noon)
        return _Clock(12, 0, True)
    return None


def read_time(message: str) -> time | None:
    """A message that is a time of day and nothing else, read as a capture reads its
    hour ("7", "7h", "19 Uhr", "um 8", "7:30 pm", "8 abends"); None for anything more."""
    text = _Text(re.sub(r"\s*:\s*", ":", message.strip()))  # "7 : 30" too
    clock = _read_clock(text, alone=True)
    if clock is None or text.work.strip(" .!"):
        return None
    return time(clock.hour, clock.minute)


@dataclass
class _Day:
    day: date
    also: date | None = None  # "next Friday" on a Friday: the one after, too


def _dated(today: date, day: int, month: int, year_text: str | None) -> _Day | None:
    """A day and month (and maybe year); without a year, the next such day."""
    year = int(year_text) if year_text else today.year
    year += 2000 if year < 100 else 0
    try:
        found = date(year, month, day)
    except ValueError:
        return None
    if not year_text and found < today:
        found = found.replace(year=year + 1)
    return _Day(found)


def _read_day(text: _Text, language: str, today: date) -> _Day | None:
    for offset, words in _DAY_WORDS.items():
        match = re.search(rf"\b(?:{words})\b", text.work)
        if match is not None:
            text.take(match)
            return _Day(today + timedelta(days=offset))
    match = _ISO.search(text.work)
    if match is not None:
        text.take(match)
        return _dated(today, int(match[3]), int(match[2]), match[1])
    weekday_re, month_re = _day_patterns()
    match = month_re.search(text.work)
    if match is not None:
        text.take(match)
        month = _names()[1][match["m1"] or match["m2"]]
        return _dated(today, int(match["d1"] or match["d2"]), month, match["y"])
    match = _NUMERIC.search(text.work)
    if match is not None:
        first, second = int(match[1]), int(match[2])
        day, month = (second, first) if language == "en" else (first, second)
        text.take(match)
        return _dated(today, day, month, match[3])
    match = weekday_re.search(text.work)
    if match is not None:
        text.take(match)
        wanted = _names()[0][match["day"]]
        ahead = (wanted - today.weekday()) % 7
        if (match["next"] or match["after"]) and ahead == 0:
            return _Day(today + timedelta(days=7), also=today + timedelta(days=14))
        return _Day(today + timedelta(days=ahead), also=None if ahead else today + timedelta(7))
    return None


def _at(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=zone)


def _future(moments, now: datetime) -> tuple[datetime, ...]:
    return tuple(sorted({m for m in moments if m > now}))


def parse(
    message: str, language: str, zone_name: str, now: datetime
) -> Captured | AskBack | NoTime | None:
    """What ``message`` asks for, read in ``language`` on ``zone_name``'s wall clock."""
    zone = zone_of(zone_name)
    text = _Text(message.strip())
    lead_in = _LEAD_IN.match(text.work)
    if lead_in is not None:
        text.take(lead_in)
    relative = _RELATIVE.search(text.work)
    if relative is not None:
        found = _dateparser_parse(text.span_of(relative), language, zone, now)
        if found is not None and found > now:
            text.take(relative)
            found = found.astimezone(zone)
            # "in 2 days at 9": that day, at that hour.
            clock = _read_clock(text) if relative["days"] else None
            if clock is not None:
                return Captured(text.title(), _at(found.date(), clock.hour, clock.minute, zone))
            # To the minute, as the person's clock says it ("in 30 minutes" at 10:00:45).
            return Captured(text.title(), found.replace(second=0, microsecond=0))
    clock = _read_clock(text)
    today = now.astimezone(zone).date()
    day = _read_day(text, language, today)
    title = text.title()
    if clock is None and day is None:
        return NoTime() if lead_in is not None else None
    if clock is None:
        days = [day.day] + ([day.also] if day.also and day.day == today else [])
        choices = _future((_at(d, t.hour, t.minute, zone) for d in days for t in DAY_CHOICES), now)
        return AskBack(title, choices[: len(DAY_CHOICES)]) if choices else None
    if day is not None and day.also is not None and day.day != today:
        # "next Friday" on a Friday: in seven days or in fourteen.
        return AskBack(
            title,
            _future((_at(d, clock.hour, clock.minute, zone) for d in (day.day, day.also)), now),
        )
    on = day.day if day is not None else today
    first = _at(on, clock.hour, clock.minute, zone)
    if first > now:
        return Captured(title, first)
    if day is not None and day.also is not None:  # a weekday that is today, hour passed
        return Captured(title, _at(day.also, clock.hour, clock.minute, zone))
    evening = (
        _at(on, clock.hour + 12, clock.minute, zone)
        if not clock.settled and clock.hour < 12
        else None
    )
    next_day = _at(on + timedelta(days=1), clock.hour, clock.minute, zone)
    if evening is not None and evening > now:
        return AskBack(title, (evening, next_day))
    if day is None:
        return Captured(title, next_day)
    return AskBack(title, _future((next_day,), now))
