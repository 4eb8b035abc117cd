"""Small, strict converters shared by the JSON providers.

Each raises ``ValueError``/``TypeError``/``KeyError`` on a field it cannot use;
the provider turns that into "skip this one event", never "fail the sync".
"""

from __future__ import annotations

import hashlib
import re
import zoneinfo
from datetime import UTC, date, datetime, time, tzinfo

MAX_EVENT_ID_LENGTH = 512
MAX_TITLE_LENGTH = 1024
_FRACTION = re.compile(r"(\.\d{6})\d+")


def require_str(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} is not a non-empty string")
    return value


def optional_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def require_bool(value: object, name: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise TypeError(f"{name} is not a boolean")
    return value


def require_minutes(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"{name} is not a non-negative integer")
    return value


def parse_datetime(value: object, name: str, zone: tzinfo | None = None) -> datetime:
    """An ISO 8601 instant as aware UTC; a naive one is read in ``zone`` (else UTC)."""
    text = require_str(value, name)
    # Graph sends seven fractional digits; Python reads at most six.
    return as_utc(datetime.fromisoformat(_FRACTION.sub(r"\1", text)), zone)


def as_utc(value: date | datetime, zone: tzinfo | None) -> datetime:
    """A date as its midnight in ``zone`` (an all-day event's start), a naive time read in
    ``zone`` (both else UTC), as aware UTC."""
    if not isinstance(value, datetime):
        value = datetime.combine(value, time())
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone or UTC)
    return value.astimezone(UTC)


def utc_text(moment: datetime) -> str:
    """``moment`` in UTC to the second, as Google and Graph take an instant."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def zone_or_none(name: object) -> tzinfo | None:
    """An IANA zone by name, or None for anything else (Windows names, garbage)."""
    if not isinstance(name, str) or not name:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def event_id(value: str) -> str:
    """Provider ids longer than the column are hashed, stably, to fit."""
    if len(value) <= MAX_EVENT_ID_LENGTH:
        return value
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def title(value: object) -> str:
    """A storable title: PostgreSQL text cannot hold NUL, and the column is bounded."""
    return optional_str(value).replace("\x00", "")[:MAX_TITLE_LENGTH]


# As Google allows: each lead is one queued row per occurrence, so more is a flood.
MAX_LEADS_PER_EVENT = 5


def sorted_leads(minutes: set[int]) -> tuple[int, ...]:
    return tuple(sorted(minutes))[:MAX_LEADS_PER_EVENT]
