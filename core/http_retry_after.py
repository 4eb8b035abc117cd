"""The HTTP ``Retry-After`` header (RFC 9110: delay-seconds or an HTTP-date), read one way."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# Nothing we wait for is worth more than a day; a larger value is cut down.
MAX_RETRY_AFTER_SECONDS = 86_400.0


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait, between 0 and a day (a past date or negative count: 0); None
    when absent or unusable. Dates are read against ``now``."""
    if not value or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            # An HTTP-date is always GMT; "-0000" is how the parser says so.
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS)
