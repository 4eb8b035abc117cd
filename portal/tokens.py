"""One-time link codes and API tokens: made, stored as digests, checked once.

Both kinds of secret that arrive from outside a session name their owner
(``<user id>-<secret>`` for Telegram's deep link, ``nudge_<user id>_<secret>``
for the API), so they are checked *inside* the owner's tenant scope: no
lookup ever reads another tenant's rows. A secret pasted under another user's
id simply matches nothing there.

An API token is live while it is not revoked, not past its expiry, and its
owner is active. A password change or reset and a deactivation revoke every
token of the account (``revoke_api_tokens``, called from ``portal.signals``);
the owner's ``is_active`` is checked on every call as well, for a deactivation
that bypassed the model (a bulk ``update``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils.crypto import salted_hmac

from accounts.models import Channel
from core.config import NudgeConfig
from portal.models import ApiToken, LinkCode

API_TOKEN_PREFIX = "nudge"  # noqa: S105 — a label, not a secret
MAX_CODE_ATTEMPTS = 5
MAX_CODES_PER_HOUR = 5
MAX_USER_ID = 2**63 - 1  # a PostgreSQL bigint
# Telegram's deep-link payload: up to 64 characters of A-Z a-z 0-9 _ -.
_TELEGRAM_PAYLOAD = re.compile(r"(?P<user>[1-9][0-9]{0,18})-(?P<secret>[A-Za-z0-9_-]{20,44})")
_API_TOKEN = re.compile(r"nudge_(?P<user>[1-9][0-9]{0,18})_(?P<secret>[A-Za-z0-9_-]{20,64})")


def digest(secret: str) -> str:
    """SHA-256 of a long random secret (a slow hash would add nothing)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def address_digest(channel: str, address: str) -> str:
    """A keyed digest of a chat id or phone number: not reversible by enumeration."""
    return salted_hmac(f"portal.address.{channel}", address, algorithm="sha256").hexdigest()


def _expiry(now: datetime, config: NudgeConfig) -> datetime:
    return now + config.link_code_lifetime


@dataclass(frozen=True)
class OwnedSecret:
    user_id: int
    secret: str


def _owned(match: re.Match[str] | None) -> OwnedSecret | None:
    # Nineteen digits pass the pattern but may exceed a bigint: no such user, not a crash.
    if match is None or int(match["user"]) > MAX_USER_ID:
        return None
    return OwnedSecret(int(match["user"]), match["secret"])


def parse_telegram_payload(payload: str) -> OwnedSecret | None:
    return _owned(_TELEGRAM_PAYLOAD.fullmatch(payload or ""))


def parse_api_token(token: str) -> OwnedSecret | None:
    return _owned(_API_TOKEN.fullmatch(token or ""))


def new_telegram_code(user_id: int, now: datetime, config: NudgeConfig) -> str:
    """A fresh deep-link payload; older unused ones stop working. Inside the user's scope."""
    LinkCode.objects.filter(user_id=user_id, channel=Channel.TELEGRAM, used_at=None).delete()
    secret = secrets.token_urlsafe(24)  # 32 characters
    LinkCode.objects.create(
        user_id=user_id,
        channel=Channel.TELEGRAM,
        secret_digest=digest(secret),
        expires_at=_expiry(now, config),
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

    Each code is a paid template message to a number the user typed, so a user
    gets at most MAX_CODES_PER_HOUR of them.
    """
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
        expires_at=_expiry(now, config),
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


def new_api_token(
    user_id: int, name: str, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token; the plaintext is returned once and never stored. Inside the scope."""
    secret = secrets.token_urlsafe(32)
    plaintext = f"{API_TOKEN_PREFIX}_{user_id}_{secret}"
    token = ApiToken.objects.create(
        user_id=user_id,
        name=name,
        secret_digest=digest(secret),
        hint=plaintext[-4:],
        expires_at=expires_at,
    )
    return token, plaintext


def live_api_tokens(user_id: int, now: datetime):
    """The user's tokens that still work: not revoked, not expired. Inside the scope."""
    return ApiToken.objects.filter(user_id=user_id, revoked_at=None).filter(
        Q(expires_at=None) | Q(expires_at__gt=now)
    )


def api_token_is_live(owned: OwnedSecret, now: datetime) -> bool:
    """Whether the token is the owner's, unrevoked, unexpired and its owner active;
    stamps its use. Inside the scope."""
    return (
        live_api_tokens(owned.user_id, now)
        .filter(secret_digest=digest(owned.secret), user__is_active=True)
        .update(last_used_at=now)
        == 1
    )


def revoke_api_tokens(user_id: int, how: str, now: datetime, token_ids=None) -> int:
    """Revoke the user's live tokens (or those of ``token_ids``), saying why.

    Inside the user's scope, or the support scope (the admin's action).
    """
    tokens = ApiToken.objects.filter(user_id=user_id, revoked_at=None)
    if token_ids is not None:
        tokens = tokens.filter(pk__in=token_ids)
    return tokens.update(revoked_at=now, revoked_how=how[:120])
