"""One-time link codes, stored as digests, spent once. A Telegram deep link names its
owner (``<user id>-<secret>``), checked in their scope; a WhatsApp code is six digits,
keyed and bound to its number, and a few wrong tries spend it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.crypto import salted_hmac

from accounts.models import Channel
from core.config import NudgeConfig
from messaging.models import LinkCode

MAX_CODE_ATTEMPTS = 5
MAX_CODES_PER_HOUR = 5
MAX_USER_ID = 2**63 - 1  # a PostgreSQL bigint
# Telegram's deep-link payload: up to 64 characters of A-Z a-z 0-9 _ -.
_TELEGRAM_PAYLOAD = re.compile(r"(?P<user>[1-9][0-9]{0,18})-(?P<secret>[A-Za-z0-9_-]{20,44})")


def digest(secret: str) -> str:
    """SHA-256 of a long random secret (a slow hash would add nothing)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def address_digest(channel: str, address: str) -> str:
    """A keyed digest of a chat id or phone number: not reversible by enumeration."""
    return salted_hmac(f"portal.address.{channel}", address, algorithm="sha256").hexdigest()


@dataclass(frozen=True)
class OwnedSecret:
    user_id: int
    secret: str


def owned_secret(match: re.Match[str] | None) -> OwnedSecret | None:
    # Nineteen digits pass the pattern but may exceed a bigint: no such user, not a crash.
    if match is None or int(match["user"]) > MAX_USER_ID:
        return None
    return OwnedSecret(int(match["user"]), match["secret"])


def parse_telegram_payload(payload: str) -> OwnedSecret | None:
    return owned_secret(_TELEGRAM_PAYLOAD.fullmatch(payload or ""))


def new_telegram_code(user_id: int, now: datetime, config: NudgeConfig) -> str:
    """A fresh deep-link payload; older unused ones stop working. Inside the scope."""
    LinkCode.objects.filter(user_id=user_id, channel=Channel.TELEGRAM, used_at=None).delete()
    secret = secrets.token_urlsafe(24)  # 32 characters
    LinkCode.objects.create(
        user_id=user_id,
        channel=Channel.TELEGRAM,
        secret_digest=digest(secret),
        expires_at=now + config.link_code_lifetime,
    )
    return f"{user_id}-{secret}"


def use_telegram_code(owned: OwnedSecret, now: datetime) -> bool:
    """Spend the code once. Inside the owner's scope."""
    spent = LinkCode.objects.filter(
        user_id=owned.user_id,
        channel=Channel.TELEGRAM,
        secret_digest=digest(owned.secret),
        used_at=None,
        expires_at__gt=now,
    ).update(used_at=now)
    return spent == 1


def _code_digest(user_id: int, address: str, code: str) -> str:
    # Six digits are guessable offline from a plain digest: key it, and bind it to the number.
    return salted_hmac(
        "portal.whatsapp.code", f"{user_id}:{address}:{code}", algorithm="sha256"
    ).hexdigest()


class TooManyCodes(Exception):
    """More confirmation messages were asked for than the hourly allowance."""


def new_whatsapp_code(user_id: int, address: str, now: datetime, config: NudgeConfig) -> str:
    """A six-digit code for ``address``; earlier unused codes stop working. Inside the scope.
    Raises :class:`TooManyCodes` past ``MAX_CODES_PER_HOUR`` (each is a paid message)."""
    recent = LinkCode.objects.filter(
        user_id=user_id, channel=Channel.WHATSAPP, created_at__gt=now - timedelta(hours=1)
    )
    if recent.count() >= MAX_CODES_PER_HOUR:
        raise TooManyCodes
    LinkCode.objects.filter(
        user_id=user_id, channel=Channel.WHATSAPP, used_at=None, expires_at__gt=now
    ).update(expires_at=now)
    code = f"{secrets.randbelow(1_000_000):06d}"
    LinkCode.objects.create(
        user_id=user_id,
        channel=Channel.WHATSAPP,
        address=address,
        secret_digest=_code_digest(user_id, address, code),
        expires_at=now + config.link_code_lifetime,
    )
    return code


def use_whatsapp_code(user_id: int, code: str, now: datetime) -> str | None:
    """The confirmed number when ``code`` is right; counts wrong guesses. Inside the scope."""
    pending = (
        LinkCode.objects.select_for_update()
        .filter(user_id=user_id, channel=Channel.WHATSAPP, used_at=None, expires_at__gt=now)
        .order_by("-created_at")
        .first()
    )
    if pending is None or pending.attempts >= MAX_CODE_ATTEMPTS:
        return None
    expected = _code_digest(user_id, pending.address, code.strip())
    if not hmac.compare_digest(expected, pending.secret_digest):
        pending.attempts += 1
        pending.save(update_fields=["attempts"])
        return None
    pending.used_at = now
    pending.save(update_fields=["used_at"])
    return pending.address
