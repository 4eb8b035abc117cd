"""A time zone from its stored name, never raising.

A zone name passed validation when it was saved, but the tz database a
process runs with may not know it (an older tzdata, a name written around the
form): every reader falls back to UTC rather than failing a page or a sweep.

A name from a request is looked up the same way, so it may be anything: a
directory of the tz database ("Europe"), a name longer than a file name may
be, a path. ``zoneinfo`` answers those with ``OSError`` or ``ValueError``
rather than "not found"; both mean "no such zone" here, and a name longer than
any zone's is not looked up at all.
"""

from __future__ import annotations

import zoneinfo

UTC_ZONE = zoneinfo.ZoneInfo("UTC")
# The longest IANA name is 32 characters; the columns that hold one take 64.
MAX_ZONE_NAME = 64


def known_zone(name: object) -> zoneinfo.ZoneInfo | None:
    """The zone named exactly ``name``, or None for anything that is not one."""
    if not isinstance(name, str) or not name or len(name) > MAX_ZONE_NAME:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


def zone_of(name: str) -> zoneinfo.ZoneInfo:
    """The zone, or UTC for a name this Python does not know (or none)."""
    return known_zone(name or "UTC") or UTC_ZONE
