"""The API's per-token rate limit: ``NUDGE_API_REQUESTS_PER_MINUTE`` per token.

A fixed one-minute window counted on the token's own row, in its owner's scope:
every web process shares it (no per-process cache), and the row lock makes
concurrent requests with one token count one after another. Past the limit
the API answers 429 with ``Retry-After`` (the seconds left in the window).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.http import HttpRequest

from core.config import NudgeConfig
from messaging.link_codes import digest
from portal.models import ApiToken
from portal.tokens import parse_api_token
from tenancy.scope import tenant_scope

WINDOW = timedelta(minutes=1)


def seconds_to_wait(
    request: HttpRequest, user_id: int, now: datetime, config: NudgeConfig
) -> int | None:
    """Count this request against its token; the seconds to wait when over the limit."""
    _, _, credentials = request.headers.get("Authorization", "").partition(" ")
    owned = parse_api_token(credentials.strip())
    if owned is None or owned.user_id != user_id:
        return None
    limit = config.api_requests_per_minute
    with tenant_scope(user_id):
        token = (
            ApiToken.objects.select_for_update()
            .filter(user_id=user_id, secret_digest=digest(owned.secret), revoked_at=None)
            .first()
        )
        if token is None:
            return None
        if token.rate_window_at is None or now - token.rate_window_at >= WINDOW:
            token.rate_window_at, token.rate_requests = now, 0
        token.rate_requests += 1
        token.save(update_fields=["rate_window_at", "rate_requests"])
        if token.rate_requests <= limit:
            return None
        return max(1, math.ceil((token.rate_window_at + WINDOW - now).total_seconds()))
