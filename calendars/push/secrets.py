"""The shared secret a provider echoes on every notification (Google's channel
``token``, Graph's ``clientState``), and how we recognise it.

Only a SHA-256 digest is stored: the secret is sent once, when the channel is
created, and never needed again, so there is nothing to decrypt or rotate.
It is long and random, so a slow hash would add nothing (as for API tokens).
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
