"""The secret a provider echoes on every notification (Google's channel ``token``,
Graph's ``clientState``). Only its SHA-256 digest is stored: it is never needed
again, and it is long and random, so a slow hash would add nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored_digest: str) -> bool:
    """Constant-time: a wrong guess learns nothing from the answer's timing."""
    return bool(stored_digest) and hmac.compare_digest(digest(secret), stored_digest)
