"""The secret a provider echoes on every notification (Google's channel ``token``,
Graph's ``clientState``). Only its digest (``core.bearer.digest``) is stored: it is
never needed again.
"""

from __future__ import annotations

import hmac
import secrets

from core.bearer import digest


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def matches(secret: str, stored_digest: str) -> bool:
    """Constant-time: a wrong guess learns nothing from the answer's timing."""
    return bool(stored_digest) and hmac.compare_digest(digest(secret), stored_digest)
