"""A time zone from its name, never raising: an unknown stored name falls back to UTC, and
a request's name may be anything (a path, too long), which means "no such zone" too."""

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
    return known_zone(name) or UTC_ZONE
