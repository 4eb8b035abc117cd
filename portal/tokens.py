"""API tokens, stored as digests. A token names its owner (``nudge_<user id>_<secret>``) and
is checked inside that owner's scope, so one under another user's id matches nothing there.
A revoked row is kept ``REVOKED_TOKENS_KEPT`` for support, then pruned."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta

from django.db.models import Q

from core.bearer import digest
from messaging.addresses import OwnedSecret, owned_secret
from portal.models import ApiToken

REVOKED_TOKENS_KEPT = timedelta(days=30)
_API_TOKEN = re.compile(r"nudge_(?P<user>[1-9][0-9]{0,18})_(?P<secret>[A-Za-z0-9_-]{20,64})")


def parse_api_token(token: str) -> OwnedSecret | None:
    return owned_secret(_API_TOKEN.fullmatch(token or ""))


def new_api_token(
    user_id: int, name: str, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token; the plaintext is returned once and never stored. Inside the scope."""
    secret = secrets.token_urlsafe(32)
    plaintext = f"nudge_{user_id}_{secret}"
    token = ApiToken.objects.create(
        user_id=user_id,
        name=name,
        secret_digest=digest(secret),
        hint=plaintext[-4:],
        expires_at=expires_at,
    )
    return token, plaintext


def api_token_is_live(owned: OwnedSecret, now: datetime) -> bool:
    """Whether the token is the owner's, unrevoked, unexpired and its owner active (on every
    call: a deactivation may bypass ``save``); stamps its use. Inside the scope."""
    return (
        ApiToken.objects.filter(
            user_id=owned.user_id,
            revoked_at=None,
            secret_digest=digest(owned.secret),
            user__is_active=True,
        )
        .filter(Q(expires_at=None) | Q(expires_at__gt=now))
        .update(last_used_at=now)
        == 1
    )


def revoke_api_tokens(user_id: int, how: str, now: datetime, token_ids=None) -> int:
    """Revoke the user's live tokens (or those of ``token_ids``), saying why.
    Inside the user's scope, or the support scope (the admin's action)."""
    tokens = ApiToken.objects.filter(user_id=user_id, revoked_at=None)
    if token_ids is not None:
        tokens = tokens.filter(pk__in=token_ids)
    return tokens.update(revoked_at=now, revoked_how=how[:120])
