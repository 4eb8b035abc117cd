"""A time zone from its stored name, never raising.

A zone name passed validation when it was saved, but the tz database a
process runs with may not know it (an older tzdata, a name written around the
form): every reader falls back to UTC rather than failing a page or a sweep.
"""

from __future__ import annotations

import zoneinfo

UTC_ZONE = zoneinfo.ZoneInfo("UTC")


def zone_of(name: str) -> zoneinfo.ZoneInfo:
    """The zone, or UTC for a name this Python does not know (or none)."""
    try:
        return zoneinfo.ZoneInfo(name or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return UTC_ZONE
