"""The HTTP ``Retry-After`` header, read one way for every client that meets it.

Calendar APIs, OAuth token endpoints, ICS hosts and Twilio all send it with a
429 or a 503. RFC 9110 allows delay-seconds or an HTTP-date. Each caller turns
the seconds into what it stores (a timedelta for a calendar connection, float
seconds for a channel) and decides what "no usable header" means for it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# Nothing we wait for is worth more than a day: a nudge is stale within hours,
# and a calendar connection backs off a day at the most. A larger value is a
# server's mistake, not a plan, so it is cut down rather than obeyed.
MAX_RETRY_AFTER_SECONDS = 86_400.0


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait, between 0 and a day; None when absent or unusable.

    A date already past, or a negative count, means "now" (0): a server whose
    clock runs behind ours still asked us to retry, not to stop. ``now`` is the
    caller's clock, so a sweep running at a given instant reads dates against it.
    """
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
