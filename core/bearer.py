"""The shared secrets a request presents: an ``Authorization: Bearer <token>`` header's
credentials (the scheme is caseless), the constant-time check of one, and the digests a
secret is stored as."""

from __future__ import annotations

import hashlib
import hmac

from django.http import HttpRequest
from django.utils.crypto import salted_hmac


def bearer_token(request: HttpRequest) -> str:
    """The request's bearer token, or "" when it carries none."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def is_secret(given: str, secret: str) -> bool:
    """Whether ``given`` is the non-empty ``secret``, in constant time. Compared as bytes:
    compare_digest refuses non-ASCII str, and a header may hold anything."""
    return bool(secret) and hmac.compare_digest(given.encode(), secret.encode())


def digest(secret: str) -> str:
    """SHA-256 of a long random secret (a slow hash would add nothing)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def keyed_digest(key: str, value: str) -> str:
    """A digest keyed by SECRET_KEY and ``key``, for a value guessable by enumeration (an
    address, a six-digit code), which a plain digest would not hide."""
    return salted_hmac(key, value, algorithm="sha256").hexdigest()
