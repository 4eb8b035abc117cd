"""Encryption at rest for calendar secrets: OAuth tokens and ICS feed addresses.

``CALENDAR_TOKEN_KEYS`` are Fernet keys, newest first: the newest encrypts, every key
decrypts. With the embedded database and no key, one is derived from ``SECRET_KEY``;
elsewhere a missing key is raised when a secret is first needed.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from urllib.parse import quote, quote_plus, urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from requests.utils import requote_uri

REDACTED = "[redacted]"
_DEV_KEY_CONTEXT = b"nudge calendars token key v1:"


class SecretDecryptionError(RuntimeError):
    """A stored secret could not be decrypted with any configured key."""


_UNREADABLE = (
    "a stored calendar secret cannot be decrypted with CALENDAR_TOKEN_KEYS (was its key removed?)"
)


def _configured_keys() -> tuple[str, ...]:
    keys = tuple(key.strip() for key in settings.CALENDAR_TOKEN_KEYS if key.strip())
    if keys:
        return keys
    if getattr(settings, "EMBEDDED_DATABASE", False):
        digest = hashlib.sha256(_DEV_KEY_CONTEXT + settings.SECRET_KEY.encode()).digest()
        return (base64.urlsafe_b64encode(digest).decode(),)
    raise ImproperlyConfigured(
        "CALENDAR_TOKEN_KEYS is not set: connected calendars need at least one Fernet key "
        "(generate one with `python -c 'from cryptography.fernet import Fernet; "
        "print(Fernet.generate_key().decode())'`)."
    )


@lru_cache(maxsize=4)
def _multifernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            "CALENDAR_TOKEN_KEYS holds a value that is not a Fernet key "
            "(32 url-safe base64-encoded bytes)."
        ) from exc


def _fernet() -> MultiFernet:
    return _multifernet(_configured_keys())


def encrypt(plaintext: str) -> str:
    """Encrypt with the newest key; the empty string stays empty (no secret stored)."""
    if not plaintext:
        return ""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str:
    """Decrypt with any configured key; the error never carries the ciphertext."""
    if not ciphertext:
        return ""
    try:
        return _fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise SecretDecryptionError(_UNREADABLE) from None


def rotate_ciphertext(ciphertext: str) -> str:
    """Re-encrypt under the newest key (``manage.py rotate_calendar_keys``)."""
    return encrypt(decrypt(ciphertext))


def _forms(secret: str) -> set[str]:
    """The ways a secret shows up in text: raw, URL-encoded, and (for a URL) its path."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret), quote(secret), requote_uri(secret)}
    parts = urlsplit(secret)
    if parts.scheme and parts.netloc:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        forms |= {path, requote_uri(path)}
    return {form for form in forms if len(form) >= 4}


def scrub(text: str, *secrets: str | None) -> str:
    """Remove every secret (raw or URL-encoded) from text bound for logs or last_error."""
    for secret in secrets:
        if not secret or len(secret) < 4:
            continue
        for form in sorted(_forms(secret), key=len, reverse=True):
            text = text.replace(form, REDACTED)
    return text
