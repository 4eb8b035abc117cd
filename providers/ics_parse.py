"""Reading an ICS feed: repairs, zones, reminders, the bounded expansion (no network).

The whole body is parsed and every recurrence expanded locally over the window, within
bounds so one hostile feed cannot burn a sweep: single events days outside the window are
dropped as text; each RRULE's work is estimated before expanding; components and
occurrences are capped; and the parse runs in a CPU-limited child killed at a deadline that
grows with the feed (``parse_template``). A bound rejects the whole feed and the previous
copy stays; one unusable event costs only that event or series, reported on the connection.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

import icalendar
import recurring_ical_events
import x_wr_timezone

from providers import meeting_links
from providers import normalize as n
from providers.base import FetchResult, MalformedPayload, ProviderEvent

logger = logging.getLogger("nudge.calendars.ics")

# A single event this far outside the window cannot touch it in any zone (offsets are +-14 h).
DATING_MARGIN = timedelta(days=2)
MAX_COMPONENTS = 20_000
MAX_OCCURRENCES = 5_000
# Recurrence steps from DTSTART to the horizon, per RRULE and in all (~100k steps a second).
MAX_STEPS_PER_RULE = 50_000
MAX_STEPS_TOTAL = 200_000
_BY_PART_SECONDS = {
    "BYSECOND": 1,
    "BYMINUTE": 60,
    "BYHOUR": 3600,
    "BYDAY": 86_400,
    "BYMONTHDAY": 86_400,
    "BYYEARDAY": 86_400,
    "BYWEEKNO": 604_800,
    "BYMONTH": 28 * 86_400,
}
# Alarms that notify on the device; EMAIL, PROCEDURE and Apple's ACTION:NONE are no reminders.
_NOTIFYING_ACTIONS = {"DISPLAY", "AUDIO"}

# Repairs, before and as the feed is read: what real calendars get wrong.
_VEVENT_BLOCK = re.compile(rb"^BEGIN:VEVENT\r?$.*?^END:VEVENT\r?$\n?", re.M | re.S)
# Lines that make a block more than one fixed interval (or that we do not date here).
_NOT_A_PAST_SINGLE = re.compile(rb"^(?:RRULE|RDATE|EXRULE|RECURRENCE-ID|DURATION)[;:]", re.M)
_DTSTART_DATE = re.compile(rb"^DTSTART(?:;[^\r\n]*?)?:(\d{8})(?:T\d{6}Z?)?\r?$", re.M)
_DTEND_DATE = re.compile(rb"^DTEND(?:;[^\r\n]*?)?:(\d{8})(?:T\d{6}Z?)?\r?$", re.M)
_VTIMEZONE_BLOCK = re.compile(
    rb"^BEGIN:VTIMEZONE[ \t]*\r?$.*?^END:VTIMEZONE[ \t]*\r?$\n?", re.M | re.S | re.I
)
_NAMELESS_TZID = re.compile(rb"^TZID:[ \t]*\r?$", re.M)
# A CalDAV object's top-level components (its VCALENDAR's own properties left out).
_TOP_COMPONENT = re.compile(
    r"^BEGIN:(?!VCALENDAR\b)([\w-]+)[ \t]*$.*?^END:\1[ \t]*$", re.M | re.S | re.I
)
_TZID_LINE = re.compile(r"^TZID[;:].*$", re.M | re.I)

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


def listed(value: Any) -> list[Any]:
    """A property that may repeat, as a list (empty when absent)."""
    if not value:
        return []
    return value if isinstance(value, list) else [value]


def first_value(rule: Any, key: str) -> Any:
    value = rule.get(key)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def drop_single_events_outside(body: bytes, after: datetime, before: datetime) -> bytes:
    """Remove, as text, single events that end before ``after`` or start after ``before``.

    An export is mostly history, and parsing is most of a feed's cost. What repeats, edits
    an occurrence, or cannot be dated here is kept for the parser.
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


def joined_calendar(objects: Iterable[str]) -> bytes:
    """CalDAV objects (each a VCALENDAR) as one calendar: every component kept, each time
    zone once (a zone without a TZID, which nothing can name, dropped). An unclosed
    component makes the search quadratic, so it runs in the parse child, under its CPU limit."""
    zones: dict[str, str] = {}
    components = []
    for text in objects:
        for found in _TOP_COMPONENT.finditer(text.replace("\r\n", "\n")):
            if found[1].upper() != "VTIMEZONE":
                components.append(found[0])
            elif tzid := _TZID_LINE.search(found[0]):
                zones.setdefault(tzid[0], found[0])
    header = "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//nudge//caldav//EN"
    text = "\n".join([header, *zones.values(), *components, "END:VCALENDAR\n"])
    return text.replace("\n", "\r\n").encode()


def drop_nameless_timezones(body: bytes) -> bytes:
    """Remove VTIMEZONEs with an empty TZID: unusable, and the parser refuses a feed with one."""
    if not _NAMELESS_TZID.search(body):
        return body
    return _VTIMEZONE_BLOCK.sub(
        lambda block: b"" if _NAMELESS_TZID.search(block[0]) else block[0], body
    )


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
        rules = listed(event.get("RRULE"))
        kept = [rule for rule in rules if rule or not isinstance(rule, icalendar.vRecur)]
        if not kept:
            event.pop("RRULE", None)
        elif len(kept) < len(rules):
            event["RRULE"] = kept
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
        for rule in listed(event.get("RRULE")):
            values = listed(rule.get("UNTIL"))
            if any(isinstance(v, datetime) and v.tzinfo is None for v in values):
                rule["UNTIL"] = [
                    v.replace(tzinfo=start.tzinfo).astimezone(UTC)
                    if isinstance(v, datetime) and v.tzinfo is None
                    else v
                    for v in values
                ]


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
        for value in listed(event.get(name)):
            try:
                value.dts  # noqa: B018
            except ValueError:
                return f"unreadable {name}"
    for rule in listed(event.get("RRULE")):
        try:
            freq = str(first_value(rule, "FREQ") or "").upper()
        except ValueError:
            return "invalid RRULE"
        if freq not in FREQ_SECONDS:
            return f"RRULE with unknown FREQ {freq[:20]!r}"
    return None


@dataclass(frozen=True)
class _Override:
    """A component that edits one occurrence (or, with RANGE=THISANDFUTURE, every later one)."""

    start: date | datetime  # its own DTSTART, as written
    recurrence_id: date | datetime  # the occurrence it replaces, as written


@dataclass
class _SeriesFacts:
    recurring: set[str] = field(default_factory=set)
    starts: dict[str, datetime] = field(default_factory=dict)  # anchors of absolute alarms
    # (UID, RECURRENCE-ID in UTC) -> the editing component.
    overrides: dict[tuple[str, datetime], _Override] = field(default_factory=dict)
    capped: set[str] = field(default_factory=set)  # reported once, not per occurrence


def parse_feed(
    body: bytes | list[str],
    *,
    start: datetime,
    end: datetime,
    timezone: str = "",
    addresses: Iterable[str] = (),
    meeting_hosts: Iterable[str] = (),
) -> FetchResult:
    """Every occurrence overlapping [start, end) as ProviderEvents, of a feed or of CalDAV
    objects (``joined_calendar``).

    Floating times are read in ``timezone`` (the reader's) unless the feed names its own
    (X-WR-TIMEZONE). ``addresses`` recognise invitations the reader declined;
    ``meeting_hosts`` are the hosts a join link may point to (none: no links). An unusable
    event is skipped and listed in ``problems``; MalformedPayload only for the whole feed.
    """
    if isinstance(body, list):
        body = joined_calendar(body)
    if not body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"BEGIN:VCALENDAR"):
        raise MalformedPayload("ics: the response is not an iCalendar feed (no BEGIN:VCALENDAR)")
    body = drop_single_events_outside(
        drop_nameless_timezones(body), start - DATING_MARGIN, end + DATING_MARGIN
    )
    try:
        calendar = icalendar.Calendar.from_ical(body)
    except Exception as exc:  # icalendar raises assorted types on broken input
        raise MalformedPayload(f"ics: cannot parse the feed ({type(exc).__name__})") from None
    if len(calendar.walk("VEVENT")) > MAX_COMPONENTS:
        raise MalformedPayload(f"ics: more than {MAX_COMPONENTS} events in the feed; refused")
    result = FetchResult(changed=True, calendar_name=str(calendar.get("X-WR-CALNAME", ""))[:255])
    repair_events(calendar, result)
    anchor_floating_until(calendar)
    feed_zone = n.zone_or_none(str(calendar.get("X-WR-TIMEZONE", "")))
    zone = feed_zone or n.zone_or_none(timezone)
    calendar = _localise_floating(calendar, feed_zone, zone)
    components = calendar.walk("VEVENT")
    _check_recurrence_work(components, end, zone)
    facts = _series_facts(components, zone)
    occurrences = _expand(calendar, start, end, result)
    if len(occurrences) > MAX_OCCURRENCES:
        raise MalformedPayload(
            f"ics: more than {MAX_OCCURRENCES} occurrences before {end:%Y-%m-%d}; refused"
        )
    mine = frozenset(filter(None, (_address(a) for a in addresses)))
    hosts = tuple(meeting_hosts)
    for occurrence in occurrences:
        try:
            event = _event(occurrence, zone, facts, mine, result, hosts)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            result.skipped_events += 1
            note(result, str(occurrence.get("UID", "?")), f"unreadable occurrence ({exc})")
            continue
        if event is not None:  # None: cancelled
            result.events.append(event)
    return result


class _KeepParams:
    """Keep a value's parameters (RANGE=THISANDFUTURE, VALUE) when a walker replaces it."""

    def walk_value_vDDDTypes(self, value: Any) -> Any:
        new = super().walk_value_vDDDTypes(value)  # type: ignore[misc]
        if new is not value:
            for key, param in value.params.items():
                if key.upper() != "TZID":
                    new.params.setdefault(key, param)
        return new


class _XWrTimezoneWalker(_KeepParams, x_wr_timezone.UTCChangingWalker):
    """Only a naive time floats (x-wr-timezone also moves zones without a TZNAME, as Outlook's)."""

    def is_Floating(self, dt: datetime) -> bool:
        return dt.tzinfo is None


class _FloatingWalker(_KeepParams, x_wr_timezone.CalendarWalker):
    """Read floating times in the reader's zone; times with a zone or in UTC keep it."""

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone

    def walk_value_datetime(self, dt: datetime) -> datetime:
        return dt.replace(tzinfo=self.zone) if dt.tzinfo is None else dt


def _localise_floating(calendar: Any, feed_zone: tzinfo | None, zone: tzinfo | None) -> Any:
    """Give floating times the feed's X-WR-TIMEZONE (UTC times too, as Google means it) or
    else the reader's zone, before expanding, so a series, its EXDATEs and RECURRENCE-IDs
    agree. The property is dropped so recurring-ical-events does not convert again."""
    if feed_zone is not None:
        calendar = _XWrTimezoneWalker(feed_zone).walk(calendar)
    elif zone is not None:
        calendar = _FloatingWalker(zone).walk(calendar)
    calendar.pop("X-WR-TIMEZONE", None)
    return calendar


def _expand(calendar: Any, start: datetime, end: datetime, result: FetchResult) -> list[Any]:
    """All occurrences in [start, end); a series the library fails on is skipped alone."""
    try:
        return recurring_ical_events.of(calendar, skip_bad_series=True).between(start, end)
    except Exception:  # the library raises its own and icalendar's errors
        logger.info("ics: the feed does not expand as a whole; expanding series by series")
    zones = [c for c in calendar.subcomponents if c.name == "VTIMEZONE"]
    series: dict[str, list[Any]] = defaultdict(list)
    for component in calendar.subcomponents:
        if component.name == "VEVENT":
            series[str(component.get("UID", ""))].append(component)
    occurrences: list[Any] = []
    for uid, components in series.items():
        part = icalendar.Calendar()
        part.subcomponents = [*zones, *components]
        try:
            query = recurring_ical_events.of(part, skip_bad_series=True)
            occurrences += query.between(start, end)
        except Exception as exc:
            result.skipped_events += len(components)
            note(result, uid, f"cannot expand the series ({type(exc).__name__}); skipped")
    return occurrences


def _check_recurrence_work(components: Iterable[Any], end: datetime, zone: tzinfo | None) -> None:
    """Estimate each RRULE's steps from DTSTART to ``end`` and refuse runaway ones."""
    total = 0.0
    for component in components:
        for rule in listed(component.get("RRULE")):
            freq = str(first_value(rule, "FREQ") or "").upper()
            if freq not in FREQ_SECONDS:
                raise MalformedPayload(f"ics: a recurrence has an unknown FREQ {freq!r}")
            try:
                interval = max(int(first_value(rule, "INTERVAL") or 1), 1)
                start = n.as_utc(component["DTSTART"].dt, zone)
            except (KeyError, TypeError, ValueError):
                continue  # the expansion skips a bad series; nothing to estimate
            stop = end
            until = first_value(rule, "UNTIL")
            if isinstance(until, date):
                stop = min(stop, n.as_utc(until, zone))
            steps = max((stop - start).total_seconds(), 0) / (FREQ_SECONDS[freq] * interval)
            for part, unit in _BY_PART_SECONDS.items():
                # A part finer than the frequency multiplies the candidates per step.
                if FREQ_SECONDS[freq] > unit and rule.get(part):
                    steps *= len(rule[part])
            count = first_value(rule, "COUNT")
            if count is not None:
                steps = min(steps, int(count))
            total += steps
            if steps > MAX_STEPS_PER_RULE or total > MAX_STEPS_TOTAL:
                raise MalformedPayload(
                    f"ics: a recurrence (FREQ={freq}) needs ~{int(steps)} steps to reach "
                    f"{end:%Y-%m-%d}; unbounded high-frequency recurrences are refused"
                )


def _series_facts(components: Iterable[Any], zone: tzinfo | None) -> _SeriesFacts:
    """Which UIDs recur, each series' first start, and the components that edit occurrences."""
    facts = _SeriesFacts()
    for component in components:
        uid = str(component.get("UID", ""))
        recurrence_id = component.get("RECURRENCE-ID")
        if component.get("RRULE") or component.get("RDATE") or recurrence_id is not None:
            facts.recurring.add(uid)
        try:
            start = component["DTSTART"].dt
            if recurrence_id is None:
                facts.starts[uid] = n.as_utc(start, zone)
            else:
                key = (uid, n.as_utc(recurrence_id.dt, zone))
                facts.overrides[key] = _Override(start, recurrence_id.dt)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    return facts


def _this_and_future(recurrence_id: Any) -> bool:
    return str(recurrence_id.params.get("RANGE", "")).upper() == "THISANDFUTURE"


def _event(
    occurrence: Any,
    zone: tzinfo | None,
    facts: _SeriesFacts,
    addresses: frozenset[str],
    result: FetchResult,
    meeting_hosts: tuple[str, ...] = (),
) -> ProviderEvent | None:
    """One occurrence as a ProviderEvent; None when it is cancelled."""
    uid = n.require_str(str(occurrence.get("UID", "")), "UID")
    status = str(occurrence.get("STATUS", "")).upper()
    if status == "CANCELLED":
        return None
    raw_start = occurrence["DTSTART"].dt
    all_day = not isinstance(raw_start, datetime)
    starts_at = n.as_utc(raw_start, zone)
    ends_at = n.as_utc(occurrence["DTEND"].dt, zone) if occurrence.get("DTEND") else None
    occurrence_start = None
    anchor = facts.starts.get(uid, starts_at)
    recurrence_id = occurrence.get("RECURRENCE-ID")
    if recurrence_id is not None:
        written = n.as_utc(recurrence_id.dt, zone)
        override = facts.overrides.get((uid, written))
        if override is not None:
            # An edited occurrence's absolute alarm belongs to the edit, not the series.
            anchor = n.as_utc(override.start, zone)
        if uid in facts.recurring:
            occurrence_start = written
            if override is not None and _this_and_future(recurrence_id):
                # Carried along by RANGE=THISANDFUTURE: its own id is its start less the shift.
                shift = override.start - override.recurrence_id
                occurrence_start = n.as_utc(raw_start - shift, zone)
    leads = _alarm_leads(occurrence, starts_at, ends_at, anchor)
    if len(leads) > n.MAX_LEADS_PER_EVENT and uid not in facts.capped:
        facts.capped.add(uid)
        kept = n.MAX_LEADS_PER_EVENT
        note(result, uid, f"{len(leads)} reminders; the {kept} nearest the start kept")
    return ProviderEvent(
        provider_event_id=n.event_id(uid),
        occurrence_start=occurrence_start,
        title=n.title(str(occurrence.get("SUMMARY", ""))),
        starts_at=starts_at,
        ends_at=ends_at,
        all_day=all_day,
        status="tentative" if status == "TENTATIVE" else "confirmed",
        declined=_declined(occurrence, addresses),
        reminder_minutes=n.sorted_leads(set(leads)),
        location=meeting_links.stored_location(str(occurrence.get("LOCATION", ""))),
        join_url=meeting_links.join_url(
            [str(occurrence.get(name, "")) for name in _LINK_PROPERTIES], meeting_hosts
        ),
    )


# Where a feed keeps a meeting's link, the dedicated properties first.
_LINK_PROPERTIES = (
    "X-GOOGLE-CONFERENCE",
    "X-MICROSOFT-SKYPETEAMSMEETINGURL",
    "URL",
    "LOCATION",
    "DESCRIPTION",
)


def _alarm_leads(
    occurrence: Any, starts_at: datetime, ends_at: datetime | None, anchor: datetime
) -> tuple[int, ...]:
    """Minutes before the occurrence's start of each display/audio alarm.

    An absolute trigger keeps its distance from ``anchor`` (the start of the component that
    carries it): RFC 5545 gives it one instant, repeating the lead is the useful reading.
    REPEAT/DURATION (snoozes) add nothing: one nudge per alarm.
    """
    leads: set[int] = set()
    for alarm in occurrence.subcomponents:
        if alarm.name != "VALARM":
            continue
        if str(alarm.get("ACTION", "DISPLAY")).strip().upper() not in _NOTIFYING_ACTIONS:
            continue
        try:
            trigger = alarm.get("TRIGGER")
            value = trigger.dt if trigger is not None else None
        except ValueError:
            continue  # an unreadable trigger costs that alarm only
        if isinstance(value, timedelta):
            offset = value
            if str(trigger.params.get("RELATED", "START")).upper() == "END":
                offset += (ends_at or starts_at) - starts_at
            lead = -offset
        elif isinstance(value, datetime):
            lead = anchor - n.as_utc(value, None)
        else:
            continue
        minutes = int(lead.total_seconds() // 60)
        if minutes >= 0:
            leads.add(minutes)
    return tuple(sorted(leads))


def _address(value: str) -> str:
    """``mailto:Me@Example.com`` and ``me@example.com`` as one comparable address."""
    text = value.strip().lower()
    return text[len("mailto:") :] if text.startswith("mailto:") else text


def _declined(occurrence: Any, addresses: frozenset[str]) -> bool:
    """Whether an ATTENDEE with one of ``addresses`` (or iCloud's EMAIL parameter) DECLINED."""
    if not addresses:
        return False
    for attendee in listed(occurrence.get("ATTENDEE")):
        if str(attendee.params.get("PARTSTAT", "")).upper() != "DECLINED":
            continue
        if {_address(str(attendee)), _address(str(attendee.params.get("EMAIL", "")))} & addresses:
            return True
    return False
