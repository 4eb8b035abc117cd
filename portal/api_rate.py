"""The API's rate limit: ``NUDGE_API_REQUESTS_PER_MINUTE`` per account, in a fixed minute on
the account's own row (a new token starts no fresh minute), counted by one upsert."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from core.config import NudgeConfig
from portal import statements
from tenancy.scope import tenant_statements

WINDOW = timedelta(minutes=1)


def seconds_to_wait(user_id: int, now: datetime, config: NudgeConfig) -> int | None:
    """Count this request against its account (the token's owner, already checked by
    the caller); the seconds to wait when over the limit, else None."""
    [[(window_at, requests)]] = tenant_statements(
        user_id,
        [statements.COUNT_API_REQUEST],
        {"user_id": user_id, "now": now, "window": WINDOW},
        # A count lost in a server crash costs nothing worth a disk flush per request.
        relaxed_commit=True,
    )
    if requests <= config.api_requests_per_minute:
        return None
    return max(1, math.ceil((window_at + WINDOW - now).total_seconds()))
