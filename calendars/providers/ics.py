"""ICS feed URLs: conditional GET, a bounded download, recurrences expanded locally.

A feed has no query API, so each parse expands occurrences from the window's
start to ``EXPAND_AHEAD`` past its end and records that horizon. While the
horizon still covers the window, runs send ``If-None-Match`` /
``If-Modified-Since``; a 304 costs no parsing and no writes. When the window
outruns the horizon (every few days) the run fetches unconditionally and
re-expands. A 200 whose body hashes the same as last time is also "unchanged".

Bounds, so one hostile or broken feed cannot stall a sweep: the body is
streamed and cut at ``settings.ICS_MAX_BYTES`` (after decompression) and at
``DOWNLOAD_SECONDS``; every RRULE's expansion work is estimated before
expanding (``FREQ=SECONDLY`` with no end, or a minutely rule begun years ago,
is refused); occurrences and components are capped; conversion has a
deadline. Any of these rejects the whole feed with a clear error and keeps
the previous copy.

The feed's address is a secret (it grants read access to the calendar), so
it is only ever shown as its host, and redirects are followed by hand so every
hop is checked against private networks too.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import socket
import time
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any
from urllib.parse import urljoin, urlsplit

import icalendar
import recurring_ical_events
import requests
import x_wr_timezone
from django.conf import settings

from calendars.providers import normalize as n
from calendars.providers.base import (
    CalendarProvider,
    ConnectionSnapshot,
    FetchResult,
    MalformedPayload,
    NeedsReauth,
    ProviderError,
    ProviderEvent,
    RetryLater,
    provider_request,
    raise_for_transient,
)

logger = logging.getLogger("nudge.calendars.ics")

NAME = "ics"
EXPAND_AHEAD = timedelta(days=6)
DOWNLOAD_SECONDS = 30.0
PARSE_SECONDS = 10.0
MAX_REDIRECTS = 3
MAX_COMPONENTS = 20_000
MAX_OCCURRENCES = 5_000
# Recurrence steps a single RRULE may take from its DTSTART to the horizon, and
# all of them together (~100k steps a second in recurring-ical-events).
MAX_STEPS_PER_RULE = 50_000
MAX_STEPS_TOTAL = 200_000
_FREQ_SECONDS = {
    "SECONDLY": 1,
    "MINUTELY": 60,
    "HOURLY": 3600,
    "DAILY": 86_400,
    "WEEKLY": 604_800,
    "MONTHLY": 28 * 86_400,
    "YEARLY": 365 * 86_400,
}
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
_REDIRECTS = {301, 302, 303, 307, 308}
# The address no longer works (reset by its owner, or revoked): only the user can fix it.
# 403 is left out: CDNs and WAFs send it for passing reasons too.
_GONE = {401, 404, 410}


class UnsafeFeedUrl(ProviderError):
    """The address is not http(s), or points into a private network."""


def feed_host(url: str) -> str:
    """The part of a feed address that may be shown: its host."""
    return urlsplit(url).hostname or "?"


def check_feed_url(url: str, *, allow_private: bool) -> None:
    """http/https only; refuse hosts that resolve to non-public addresses (SSRF)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeFeedUrl("ics: the feed address must be an http:// or https:// URL")
    if allow_private:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        raise RetryLater(f"ics: cannot resolve {parts.hostname}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if not address.is_global:
            raise UnsafeFeedUrl(
                f"ics: {parts.hostname} resolves to a private or local address; refused"
            )


class IcsFeedProvider(CalendarProvider):
    name = NAME

    def fetch(
        self,
        snapshot: ConnectionSnapshot,
        *,
        now: datetime,
        window_start: datetime,
        window_end: datetime,
    ) -> FetchResult:
        if not snapshot.feed_url:
            raise ProviderError("ics: no feed address stored")
        state = snapshot.sync_state
        expanded_until = _parse_state_time(state.get("expanded_until"))
        covered = (
            not snapshot.full_sync and expanded_until is not None and expanded_until >= window_end
        )
        headers = {"Accept": "text/calendar, */*;q=0.5"}
        if covered and state.get("etag"):
            headers["If-None-Match"] = state["etag"]
        if covered and state.get("last_modified"):
            headers["If-Modified-Since"] = state["last_modified"]
        response = self._get(snapshot, headers)
        with response:
            raise_for_transient(response, NAME, now)
            validators = {
                "etag": response.headers.get("ETag", state.get("etag", "") if covered else ""),
                "last_modified": response.headers.get(
                    "Last-Modified", state.get("last_modified", "") if covered else ""
                ),
            }
            if response.status_code == 304 and covered:
                return FetchResult(changed=False, sync_state={**state, **validators})
            if response.status_code in _GONE:
                raise NeedsReauth(
                    f"ics: the feed answered HTTP {response.status_code}; its address may have "
                    "been reset — connect the new address"
                )
            if response.status_code != 200:
                raise ProviderError(f"ics: the feed answered HTTP {response.status_code}")
            body = _bounded_body(response)
        digest = hashlib.sha256(body).hexdigest()
        if covered and digest == state.get("body_sha256"):
            return FetchResult(changed=False, sync_state={**state, **validators})
        horizon = window_end + EXPAND_AHEAD
        result = parse_feed(body, start=window_start, end=horizon, account=snapshot.account)
        result.sync_state = {
            **validators,
            "body_sha256": digest,
            "expanded_until": horizon.isoformat(),
        }
        return result

    def _get(self, snapshot: ConnectionSnapshot, headers: dict[str, str]) -> requests.Response:
        url = snapshot.feed_url
        for _hop in range(MAX_REDIRECTS + 1):
            check_feed_url(url, allow_private=snapshot.allow_private_network)
            response = provider_request(
                NAME,
                "api",
                "GET",
                url,
                headers=headers,
                stream=True,
                allow_redirects=False,
                secrets=(snapshot.feed_url, url),
            )
            location = response.headers.get("Location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            response.close()
            url = urljoin(url, location)
        raise ProviderError("ics: too many redirects")


def _parse_state_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _bounded_body(response: requests.Response) -> bytes:
    limit = settings.ICS_MAX_BYTES
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise MalformedPayload(f"ics: the feed is larger than {limit} bytes; refused")
    deadline = time.monotonic() + DOWNLOAD_SECONDS
    body = bytearray()
    try:
        for chunk in response.iter_content(chunk_size=64 * 1024):
            body += chunk
            if len(body) > limit:
                raise MalformedPayload(f"ics: the feed is larger than {limit} bytes; refused")
            if time.monotonic() > deadline:
                raise ProviderError(f"ics: the download took longer than {DOWNLOAD_SECONDS:.0f}s")
    except requests.RequestException:
        raise ProviderError("ics: the download was interrupted") from None
    return bytes(body)


# --- Parsing and expansion ---------------------------------------------------


def parse_feed(body: bytes, *, start: datetime, end: datetime, account: str = "") -> FetchResult:
    """Every occurrence overlapping [start, end) as ProviderEvents; MalformedPayload if unusable."""
    deadline = time.monotonic() + PARSE_SECONDS
    if not body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"BEGIN:VCALENDAR"):
        raise MalformedPayload("ics: the response is not an iCalendar feed (no BEGIN:VCALENDAR)")
    try:
        calendar = icalendar.Calendar.from_ical(body)
    except Exception as exc:  # icalendar raises assorted types on broken input
        raise MalformedPayload(f"ics: cannot parse the feed ({type(exc).__name__})") from None
    components = calendar.walk("VEVENT")
    if len(components) > MAX_COMPONENTS:
        raise MalformedPayload(f"ics: more than {MAX_COMPONENTS} events in the feed; refused")
    zone = n.zone_or_none(str(calendar.get("X-WR-TIMEZONE", "")))
    calendar = _apply_x_wr_timezone(calendar, zone)
    _check_recurrence_work(components, end, zone)
    recurring_uids, series_starts = _series_facts(components, zone)
    try:
        occurrences = recurring_ical_events.of(calendar, skip_bad_series=True).between(start, end)
    except Exception as exc:  # the library raises its own and icalendar's errors
        raise MalformedPayload(f"ics: cannot expand the feed ({type(exc).__name__})") from None
    if len(occurrences) > MAX_OCCURRENCES:
        raise MalformedPayload(
            f"ics: more than {MAX_OCCURRENCES} occurrences before {end:%Y-%m-%d}; refused"
        )
    result = FetchResult(changed=True, calendar_name=str(calendar.get("X-WR-CALNAME", ""))[:255])
    for index, occurrence in enumerate(occurrences):
        if time.monotonic() > deadline:
            raise MalformedPayload(f"ics: reading the feed took longer than {PARSE_SECONDS:.0f}s")
        try:
            event = _event(occurrence, zone, recurring_uids, series_starts, account)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            result.skipped_events += 1
            logger.warning("ics: skipped occurrence %d: %s", index, exc)
            continue
        if event is None:
            result.cancelled_events += 1
        else:
            result.events.append(event)
    return result


class _XWrTimezoneWalker(x_wr_timezone.UTCChangingWalker):
    """x-wr-timezone takes any zone without a TZNAME (Outlook's VTIMEZONEs omit it)
    for a floating time and moves it into X-WR-TIMEZONE; only a naive time floats."""

    def is_Floating(self, dt: datetime) -> bool:
        return dt.tzinfo is None


def _apply_x_wr_timezone(calendar: Any, zone: tzinfo | None) -> Any:
    """Read floating and UTC times in the calendar's X-WR-TIMEZONE (as Google means them),
    then drop the property so recurring-ical-events does not convert a second time."""
    if zone is not None:
        calendar = _XWrTimezoneWalker(zone).walk(calendar)
    calendar.pop("X-WR-TIMEZONE", None)
    return calendar


def _as_utc(value: date | datetime, zone: tzinfo | None) -> datetime:
    """A DATE as midnight in the feed's zone; a floating time read in it; both as UTC."""
    if not isinstance(value, datetime):
        return n.start_of_day(value, zone)
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone or UTC)
    return value.astimezone(UTC)


def _rules(component: Any) -> list[Any]:
    rules = component.get("RRULE")
    if rules is None:
        return []
    return rules if isinstance(rules, list) else [rules]


def _first(rule: Any, key: str) -> Any:
    value = rule.get(key)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _check_recurrence_work(components: Iterable[Any], end: datetime, zone: tzinfo | None) -> None:
    """Estimate each RRULE's steps from DTSTART to ``end`` and refuse runaway ones."""
    total = 0.0
    for component in components:
        for rule in _rules(component):
            freq = str(_first(rule, "FREQ") or "").upper()
            if freq not in _FREQ_SECONDS:
                raise MalformedPayload(f"ics: a recurrence has an unknown FREQ {freq!r}")
            try:
                interval = max(int(_first(rule, "INTERVAL") or 1), 1)
                start = _as_utc(component["DTSTART"].dt, zone)
            except (KeyError, TypeError, ValueError):
                continue  # the expansion skips a bad series; nothing to estimate
            stop = end
            until = _first(rule, "UNTIL")
            if isinstance(until, date):
                stop = min(stop, _as_utc(until, zone))
            steps = max((stop - start).total_seconds(), 0) / (_FREQ_SECONDS[freq] * interval)
            for part, unit in _BY_PART_SECONDS.items():
                # A part finer than the frequency multiplies the candidates per step.
                if _FREQ_SECONDS[freq] > unit and rule.get(part):
                    steps *= len(rule[part])
            count = _first(rule, "COUNT")
            if count is not None:
                steps = min(steps, int(count))
            total += steps
            if steps > MAX_STEPS_PER_RULE or total > MAX_STEPS_TOTAL:
                raise MalformedPayload(
                    f"ics: a recurrence (FREQ={freq}) needs ~{int(steps)} steps to reach "
                    f"{end:%Y-%m-%d}; unbounded high-frequency recurrences are refused"
                )


def _series_facts(
    components: Iterable[Any], zone: tzinfo | None
) -> tuple[set[str], dict[str, datetime]]:
    """UIDs that recur, and each series' first start (the anchor for absolute alarms)."""
    recurring: set[str] = set()
    starts: dict[str, datetime] = {}
    for component in components:
        uid = str(component.get("UID", ""))
        if component.get("RRULE") or component.get("RDATE") or component.get("RECURRENCE-ID"):
            recurring.add(uid)
        if component.get("RECURRENCE-ID") is None and component.get("DTSTART") is not None:
            try:
                starts[uid] = _as_utc(component["DTSTART"].dt, zone)
            except (TypeError, ValueError, AttributeError):
                pass
    return recurring, starts


def _event(
    occurrence: Any,
    zone: tzinfo | None,
    recurring_uids: set[str],
    series_starts: dict[str, datetime],
    account: str,
) -> ProviderEvent | None:
    """One occurrence as a ProviderEvent; None when it is cancelled."""
    uid = n.require_str(str(occurrence.get("UID", "")), "UID")
    status = str(occurrence.get("STATUS", "")).upper()
    if status == "CANCELLED":
        return None
    raw_start = occurrence["DTSTART"].dt
    all_day = not isinstance(raw_start, datetime)
    starts_at = _as_utc(raw_start, zone)
    ends_at = _as_utc(occurrence["DTEND"].dt, zone) if occurrence.get("DTEND") else None
    occurrence_start = None
    if uid in recurring_uids and occurrence.get("RECURRENCE-ID") is not None:
        occurrence_start = _as_utc(occurrence["RECURRENCE-ID"].dt, zone)
    leads = _alarm_leads(occurrence, starts_at, ends_at, series_starts.get(uid, starts_at))
    return ProviderEvent(
        provider_event_id=n.event_id(uid),
        occurrence_start=occurrence_start,
        title=n.title(str(occurrence.get("SUMMARY", ""))),
        starts_at=starts_at,
        ends_at=ends_at,
        all_day=all_day,
        status="tentative" if status == "TENTATIVE" else "confirmed",
        declined=_declined(occurrence, account),
        reminder_minutes=leads,
    )


def _alarm_leads(
    occurrence: Any, starts_at: datetime, ends_at: datetime | None, series_start: datetime
) -> tuple[int, ...]:
    """Minutes before the occurrence's start of each display/audio alarm.

    A trigger related to the END is moved by the occurrence's duration; an
    absolute trigger keeps its distance from the series' first start (RFC 5545
    gives it one instant; repeating that lead is the useful reading).
    """
    leads: set[int] = set()
    for alarm in occurrence.subcomponents:
        if alarm.name != "VALARM":
            continue
        if str(alarm.get("ACTION", "DISPLAY")).upper() == "EMAIL":
            continue
        trigger = alarm.get("TRIGGER")
        if trigger is None:
            continue
        value = trigger.dt
        if isinstance(value, timedelta):
            offset = value
            if str(trigger.params.get("RELATED", "START")).upper() == "END":
                offset += (ends_at or starts_at) - starts_at
            lead = -offset
        elif isinstance(value, datetime):
            lead = series_start - _as_utc(value, None)
        else:
            continue
        minutes = int(lead.total_seconds() // 60)
        if minutes >= 0:
            leads.add(minutes)
    return n.sorted_leads(leads)


def _declined(occurrence: Any, account: str) -> bool:
    """Declined by the feed's owner, when the feed names its owner (Google: the address)."""
    if "@" not in account:
        return False
    attendees = occurrence.get("ATTENDEE") or []
    if not isinstance(attendees, list):
        attendees = [attendees]
    me = f"mailto:{account}".lower()
    return any(
        str(a).lower() == me and str(a.params.get("PARTSTAT", "")).upper() == "DECLINED"
        for a in attendees
    )
