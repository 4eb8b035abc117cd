"""OAuth 2 token endpoint calls shared by Google and Microsoft (RFC 6749).

The code exchange carries a PKCE verifier (RFC 7636, S256), so an intercepted code is
useless without the verifier, which never leaves the user's session. ``invalid_grant`` and
its kin mean consent is gone: the connection needs the user.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import requests

from providers.base import (
    ConnectionSnapshot,
    MalformedPayload,
    NeedsReauth,
    ProviderError,
    json_body,
    oauth_error_code,
    provider_request,
    raise_for_transient,
)

# Refresh a little early so a token never expires between the check and the call.
REFRESH_MARGIN = timedelta(minutes=5)
_REAUTH_ERRORS = {"invalid_grant", "interaction_required", "consent_required"}


@dataclass
class TokenGrant:
    access_token: str = field(repr=False)
    refresh_token: str = field(repr=False)
    expires_at: datetime | None


@dataclass(frozen=True)
class TokenEndpoint:
    provider: str
    url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""


def _grant_from(response: requests.Response, endpoint: TokenEndpoint, now: datetime) -> TokenGrant:
    raise_for_transient(response, endpoint.provider, now)
    if response.status_code != 200:
        code = oauth_error_code(response)
        if code in _REAUTH_ERRORS:
            raise NeedsReauth(f"{endpoint.provider}: token refused ({code}); reconnect needed")
        raise ProviderError(
            f"{endpoint.provider}: token endpoint answered HTTP {response.status_code}"
            + (f" ({code})" if code else "")
        )
    body = json_body(response, endpoint.provider)
    access_token = body.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise MalformedPayload(f"{endpoint.provider}: token response has no access_token")
    expires_in = body.get("expires_in")
    expires_at = None
    if isinstance(expires_in, int | str) and str(expires_in).isdigit():
        expires_at = now + timedelta(seconds=int(expires_in))
    refresh_token = body.get("refresh_token")
    return TokenGrant(
        access_token=access_token,
        refresh_token=refresh_token if isinstance(refresh_token, str) else "",
        expires_at=expires_at,
    )


def _token_grant(
    endpoint: TokenEndpoint,
    grant: dict[str, str],
    secrets: tuple[str, ...],
    now: datetime,
    timeout: float,
) -> TokenGrant:
    """POST one OAuth grant to the token endpoint, with our client credentials."""
    data = {**grant, "client_id": endpoint.client_id, "client_secret": endpoint.client_secret}
    if endpoint.scope:
        data["scope"] = endpoint.scope
    response = provider_request(
        endpoint.provider,
        "POST",
        endpoint.url,
        data=data,
        secrets=(*secrets, endpoint.client_secret),
        timeout=timeout,
    )
    return _grant_from(response, endpoint, now)


@dataclass(frozen=True)
class Pkce:
    """A PKCE pair: the verifier stays with us, the challenge goes to the consent page."""

    verifier: str = field(repr=False)

    @classmethod
    def new(cls) -> Pkce:
        # 64 random bytes: 86 characters of the unreserved alphabet (43-128 allowed).
        return cls(secrets.token_urlsafe(64))

    def authorize_params(self) -> dict[str, str]:
        """The S256 challenge, BASE64URL(SHA256(verifier)) without padding (RFC 7636 4.2)."""
        digest = hashlib.sha256(self.verifier.encode("ascii")).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
        return {"code_challenge": challenge, "code_challenge_method": "S256"}


def exchange_code(
    endpoint: TokenEndpoint,
    *,
    code: str,
    redirect_uri: str,
    code_verifier: str,
    now: datetime,
    timeout: float,
) -> TokenGrant:
    """The authorisation-code grant at the end of the consent redirect, with its PKCE verifier."""
    return _token_grant(
        endpoint,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": code_verifier,
        },
        (code, code_verifier),
        now,
        timeout,
    )


def refresh(endpoint: TokenEndpoint, snapshot: ConnectionSnapshot, now: datetime) -> None:
    """The refresh-token grant; a rotated refresh token (Microsoft) replaces the old one."""
    if not snapshot.refresh_token:
        raise NeedsReauth(f"{endpoint.provider}: no refresh token stored; reconnect needed")
    grant = _token_grant(
        endpoint,
        {"grant_type": "refresh_token", "refresh_token": snapshot.refresh_token},
        snapshot.secrets(),
        now,
        snapshot.config.calendar_http_timeout_seconds,
    )
    snapshot.update_tokens(
        access_token=grant.access_token,
        expires_at=grant.expires_at,
        refresh_token=grant.refresh_token or None,
    )


def ensure_fresh_token(
    endpoint: TokenEndpoint, snapshot: ConnectionSnapshot, now: datetime
) -> None:
    """Refresh when the access token is missing, of unknown age, or about to expire."""
    expires_at = snapshot.token_expires_at
    if snapshot.access_token and expires_at is not None and expires_at > now + REFRESH_MARGIN:
        return
    refresh(endpoint, snapshot, now)
