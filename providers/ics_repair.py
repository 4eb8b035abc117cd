"""Repairs to a feed before and as ``ics_parse`` reads it: what real calendars get wrong."""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import icalendar

from providers.base import FetchResult

_VEVENT_BLOCK = re.compile(rb"^BEGIN:VEVENT\r?$.*?^END:VEVENT\r?$\n?", re.M | re.S)
# Lines that make a block more than one fixed interval (or that we do not date here).
_NOT_A_PAST_SINGLE = re.compile(rb"^(?:RRULE|RDATE|EXRULE|RECURRENCE-ID|DURATION)[;:]", re.M)
_DTSTART_DATE = re.compile(rb"^DTSTART(?:;[^\r\n]*?)?:(\d{8})(?:T\d{6}Z?)?\r?$", re.M)
_DTEND_DATE = re.compile(rb"^DTEND(?:;[^\r\n]*?)?:(\d{8})(?:T\d{6}Z?)?\r?$", re.M)

logger = logging.getLogger("nudge.calendars.ics")

MAX_PROBLEMS_LISTED = 5

FREQ_SECONDS = {
    "SECONDLY": 1,
    "MINUTELY": 60,
    "HOURLY": 3600,
    "DAILY": 86_400,
    "WEEKLY": 604_800,
    "MONTHLY": 28 * 86_400,
    "YEARLY": 365 * 86_400,
}


def rules_of(component: Any) -> list[Any]:
    rules = component.get("RRULE")
    if rules is None:
        return []
    return rules if isinstance(rules, list) else [rules]


def first_value(rule: Any, key: str) -> Any:
    value = rule.get(key)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def drop_single_events_outside(body: bytes, after: datetime, before: datetime) -> bytes:
    """Remove, as text, single events that end before ``after`` or start after ``before``.

    An export is mostly history, and parsing is most of a feed's cost (~1.3 MB/s). What
    repeats, edits an occurrence, or cannot be dated here is kept for the parser.
    """
    first, last = (moment.strftime("%Y%m%d").encode() for moment in (after, before))

    def keep(match: re.Match[bytes]) -> bytes:
        block = match.group(0)
        if _NOT_A_PAST_SINGLE.search(block):
            return block
        start = _DTSTART_DATE.search(block)
        if start is None:
            return block
        end = _DTEND_DATE.search(block)
        ends = max(start.group(1), end.group(1) if end else b"")
        return b"" if ends < first or start.group(1) > last else block

    return _VEVENT_BLOCK.sub(keep, body)


def note(result: FetchResult, uid: str, problem: str) -> None:
    """Record a skipped or repaired event for the connection's report (a few, then a count)."""
    logger.warning("ics: %s: %s", uid[:80], problem)
    if len(result.problems) < MAX_PROBLEMS_LISTED:
        result.problems.append(f"UID {uid[:80]}: {problem}")


def drop_nameless_timezones(body: bytes) -> bytes:
    """Remove VTIMEZONEs with an empty TZID: unusable, and the parser refuses a feed with one."""
    if not re.search(rb"(?m)^TZID:[ \t]*\r?$", body):
        return body
    lines = body.splitlines(keepends=True)
    kept: list[bytes] = []
    block: list[bytes] | None = None
    for line in lines:
        upper = line.strip().upper()
        if block is None and upper == b"BEGIN:VTIMEZONE":
            block = [line]
        elif block is not None:
            block.append(line)
            if upper == b"END:VTIMEZONE":
                if not any(re.fullmatch(rb"TZID:[ \t]*", b.strip()) for b in block):
                    kept.extend(block)
                block = None
        else:
            kept.append(line)
    return b"".join(kept + (block or []))


def repair_events(calendar: Any, result: FetchResult) -> None:
    """Make each event usable on its own, or remove its series and say so.

    An event without a UID gets a stable derived one; an empty ``RRULE:`` means "does not
    repeat"; a series with a property the expansion cannot read is skipped.
    """
    events = [c for c in calendar.subcomponents if c.name == "VEVENT"]
    seen: Counter[str] = Counter()
    for event in events:
        if not str(event.get("UID", "")).strip():
            event["UID"] = _derived_uid(event, seen)
            note(result, event["UID"], "no UID; kept under an id derived from its start and title")
        rules = event.get("RRULE")
        if isinstance(rules, list):
            rules = [rule for rule in rules if not _is_empty_rule(rule)]
            if rules:
                event["RRULE"] = rules
            else:
                del event["RRULE"]
        elif rules is not None and _is_empty_rule(rules):
            del event["RRULE"]
    broken: dict[str, int] = {}
    for event in events:
        uid = str(event["UID"])
        problem = _unreadable(event)
        if problem is not None and uid not in broken:
            note(result, uid, f"{problem}; the series is skipped")
            broken[uid] = 0
    if not broken:
        return
    kept = []
    for component in calendar.subcomponents:
        uid = str(component.get("UID", ""))
        if component.name == "VEVENT" and uid in broken:
            result.skipped_events += 1
        else:
            kept.append(component)
    calendar.subcomponents = kept


def anchor_floating_until(calendar: Any) -> None:
    """Read a zoned series' UNTIL written without a zone in the series' zone, as UTC.

    RFC 5545 wants UTC there, but clients write the local time of the last start; read as
    UTC, the series would end hours early west of Greenwich. Runs before floating times
    get the feed's or the reader's zone, which is not what a zoned series' UNTIL means.
    """
    for event in calendar.walk("VEVENT"):
        try:
            start = event["DTSTART"].dt
        except (KeyError, ValueError):
            continue
        if not isinstance(start, datetime) or start.tzinfo is None:
            continue
        for rule in rules_of(event):
            until = rule.get("UNTIL")
            values = until if isinstance(until, list) else [until]
            if any(isinstance(v, datetime) and v.tzinfo is None for v in values):
                rule["UNTIL"] = [
                    v.replace(tzinfo=start.tzinfo).astimezone(UTC)
                    if isinstance(v, datetime) and v.tzinfo is None
                    else v
                    for v in values
                ]


def _is_empty_rule(rule: Any) -> bool:
    return isinstance(rule, icalendar.vRecur) and not rule


def _derived_uid(event: Any, seen: Counter[str]) -> str:
    """The same event gets the same id on every fetch; an edited one is a new event."""
    text = "\x1f".join(_raw(event.get(name)) for name in ("DTSTART", "SUMMARY", "RRULE"))
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]
    ordinal = seen[digest]
    seen[digest] += 1
    return f"nouid-{digest}" + (f"-{ordinal}" if ordinal else "")


def _raw(value: Any) -> str:
    if value is None:
        return ""
    try:
        return value.to_ical().decode("utf-8", "replace")
    except Exception:  # a broken property still has a stable text form
        return str(value)


def _unreadable(event: Any) -> str | None:
    """Why the expansion could not use this event, or None."""
    if event.get("DTSTART") is None:
        return "no DTSTART"
    for name in ("DTSTART", "DTEND", "DURATION", "RECURRENCE-ID"):
        if name in event:
            try:
                event[name].dt  # noqa: B018 — reading is the check
            except ValueError:
                return f"unreadable {name}"
    for name in ("RDATE", "EXDATE"):
        values = event.get(name)
        for value in values if isinstance(values, list) else [values] if values else []:
            try:
                value.dts  # noqa: B018
            except ValueError:
                return f"unreadable {name}"
    for rule in rules_of(event):
        try:
            freq = str(first_value(rule, "FREQ") or "").upper()
        except ValueError:
            return "invalid RRULE"
        if freq not in FREQ_SECONDS:
            return f"RRULE with unknown FREQ {freq[:20]!r}"
    return None
