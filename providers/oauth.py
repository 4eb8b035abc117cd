"""OAuth 2 for Google and Microsoft Graph (RFC 6749): the token endpoint, and the
authorised calls and paged lists of their calendar APIs.

The code exchange carries a PKCE verifier (RFC 7636, S256), so an intercepted code is
useless without the verifier, which never leaves the user's session. ``invalid_grant`` and
its kin mean consent is gone: the connection needs the user. A list refreshes the token when
due and once more after a 401, never twice (Microsoft rotates refresh tokens), so a second
401 is NeedsReauth.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import requests

from providers.base import (
    ConnectionSnapshot,
    FetchResult,
    MalformedPayload,
    NeedsReauth,
    ProviderError,
    ProviderEvent,
    RetryLater,
    json_body,
    provider_request,
    raise_for_transient,
    retry_after_delay,
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
class OAuthApi:
    """What one provider does its own way: its consent and token endpoints, and its calendar
    list, which the shared loop (:func:`fetch_pages`) pages through."""

    provider: str
    authorize_url: str
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    base_url: str  # the API's root, without a trailing slash
    operation: str  # the list endpoint as errors name it, e.g. "events.list"
    items_key: str  # where a page keeps its list
    # The URL after a page (given the first page's); None on the last page;
    # MalformedPayload for a next page that must not be followed.
    next_page: Callable[[dict[str, Any], str], str | None]
    scope: str = ""  # sent to the token endpoint when set (Microsoft)
    headers: Mapping[str, str] = field(default_factory=dict)
    is_rate_limit_403: Callable[[requests.Response], bool] = lambda _response: False


def _token_grant(
    api: OAuthApi,
    grant: dict[str, str],
    now: datetime,
    timeout: float,
) -> TokenGrant:
    data = {**grant, "client_id": api.client_id, "client_secret": api.client_secret}
    if api.scope:
        data["scope"] = api.scope
    response = provider_request(
        api.provider,
        "POST",
        api.token_url,
        data=data,
        timeout=timeout,
    )
    raise_for_transient(response.status_code, response.headers, api.provider, now)
    if response.status_code != 200:
        try:
            code = json_body(response, api.provider).get("error")
        except MalformedPayload:
            code = None
        code = code[:64] if isinstance(code, str) else ""
        if code in _REAUTH_ERRORS:
            raise NeedsReauth(f"{api.provider}: token refused ({code}); reconnect needed")
        raise ProviderError(
            f"{api.provider}: token endpoint answered HTTP {response.status_code}"
            + (f" ({code})" if code else "")
        )
    body = json_body(response, api.provider)
    access_token = body.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise MalformedPayload(f"{api.provider}: token response has no access_token")
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


def pkce_pair() -> tuple[str, dict[str, str]]:
    """A PKCE verifier, which stays with us, and the consent page's parameters: its S256
    challenge, BASE64URL(SHA256(verifier)) without padding (RFC 7636 4.2)."""
    # 64 random bytes: 86 characters of the unreserved alphabet (43-128 allowed).
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return verifier, {"code_challenge": challenge, "code_challenge_method": "S256"}


def exchange_code(
    api: OAuthApi,
    *,
    code: str,
    redirect_uri: str,
    code_verifier: str,
    now: datetime,
    timeout: float,
) -> TokenGrant:
    """The authorisation-code grant at the end of the consent redirect, with its PKCE verifier."""
    return _token_grant(
        api,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": code_verifier,
        },
        now,
        timeout,
    )


def refresh(api: OAuthApi, snapshot: ConnectionSnapshot, now: datetime) -> None:
    """The refresh-token grant; a rotated refresh token (Microsoft) replaces the old one."""
    if not snapshot.refresh_token:
        raise NeedsReauth(f"{api.provider}: no refresh token stored; reconnect needed")
    grant = _token_grant(
        api,
        {"grant_type": "refresh_token", "refresh_token": snapshot.refresh_token},
        now,
        snapshot.config.calendar_http_timeout_seconds,
    )
    snapshot.access_token = grant.access_token
    snapshot.token_expires_at = grant.expires_at
    snapshot.refresh_token = grant.refresh_token or snapshot.refresh_token
    snapshot.credentials_changed = True  # ``sync`` stores them whatever happens next


def ensure_fresh_token(api: OAuthApi, snapshot: ConnectionSnapshot, now: datetime) -> None:
    """Refresh when the access token is missing, of unknown age, or about to expire."""
    expires_at = snapshot.token_expires_at
    if snapshot.access_token and expires_at is not None and expires_at > now + REFRESH_MARGIN:
        return
    refresh(api, snapshot, now)


# One page holds a normal calendar's whole window; beyond this the answer is refused as
# malformed, so a provider that keeps naming a next page cannot spend the sync budget.
# The retry after a 401 is not counted.
MAX_PAGES = 4


def fetch_pages(
    api: OAuthApi, first: str, snapshot: ConnectionSnapshot, now: datetime
) -> list[dict[str, Any]]:
    """Every page's body, in order, its list under ``items_key`` (empty when absent). 429,
    5xx and a rate-limit 403 are RetryLater, other statuses ProviderError, a page that is
    not a JSON object with a list MalformedPayload."""
    ensure_fresh_token(api, snapshot, now)
    pages: list[dict[str, Any]] = []
    refreshed_after_401 = False
    url: str | None = first
    while url is not None:
        if len(pages) == MAX_PAGES:
            raise MalformedPayload(f"{api.provider}: more than {MAX_PAGES} pages for one window")
        response = _call(api, snapshot, "GET", url)
        if response.status_code == 401 and not refreshed_after_401:
            refreshed_after_401 = True
            refresh(api, snapshot, now)
            response = _call(api, snapshot, "GET", url)
        body = _page_body(api, response, now)
        if not isinstance(body.setdefault(api.items_key, []), list):
            raise MalformedPayload(
                f"{api.provider}: {api.operation} '{api.items_key}' is not a list"
            )
        pages.append(body)
        url = api.next_page(body, first)
    return pages


def window_events(
    api: OAuthApi,
    pages: list[dict[str, Any]],
    window_start: datetime,
    window_end: datetime,
    *,
    cancelled: Callable[[dict[str, Any]], bool],
    event: Callable[[dict[str, Any]], ProviderEvent],
) -> FetchResult:
    """The pages' items as the window's events, the window stored as what the copy covers;
    one unusable item is skipped, never the sync."""
    logger = logging.getLogger(f"nudge.calendars.{api.provider}")
    covered = {"window_start": window_start.isoformat(), "window_end": window_end.isoformat()}
    result = FetchResult(changed=True, sync_state=covered)
    items = [item for page in pages for item in page[api.items_key]]
    for index, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise TypeError("event is not an object")
            if cancelled(item):
                continue
            result.events.append(event(item))
        except (KeyError, TypeError, ValueError) as exc:
            result.skipped_events += 1
            logger.warning("%s: skipped event %d: %s", api.provider, index, exc)
    return result


def api_call(
    api: OAuthApi,
    snapshot: ConnectionSnapshot,
    method: str,
    path: str,
    now: datetime,
    payload: Any = None,
) -> requests.Response:
    """One authorised call beside the list (push) to ``path`` under the API's root, with a
    fresh token, paced like the pages."""
    ensure_fresh_token(api, snapshot, now)
    return _call(api, snapshot, method, api.base_url + path, payload)


def _call(
    api: OAuthApi,
    snapshot: ConnectionSnapshot,
    method: str,
    url: str,
    payload: Any = None,
) -> requests.Response:
    return provider_request(
        api.provider,
        method,
        url,
        json=payload,
        headers={**api.headers, "Authorization": f"Bearer {snapshot.access_token}"},
        paced_for=snapshot,
        is_rate_limit_403=api.is_rate_limit_403,
        timeout=snapshot.config.calendar_http_timeout_seconds,
    )


def answer_body(
    api: OAuthApi, response: requests.Response, operation: str, ok: tuple[int, ...] = (200,)
) -> dict[str, Any]:
    """The JSON object an ``api_call`` answered with; a rate limit or 5xx is RetryLater,
    another status ProviderError."""
    status = response.status_code
    if status not in ok:
        message = f"{api.provider}: {operation} answered HTTP {status}"
        if status == 429 or status >= 500 or api.is_rate_limit_403(response):
            raise RetryLater(message)
        raise ProviderError(message)
    return json_body(response, api.provider)


def account_body(
    provider: str, url: str, access_token: str, timeout: float, what: str, **kwargs: Any
) -> dict[str, Any]:
    """The JSON object at ``url``, read with a token just granted (the account's label)."""
    response = provider_request(
        provider,
        "GET",
        url,
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=timeout,
        **kwargs,
    )
    if response.status_code != 200:
        raise ProviderError(f"{provider}: reading {what} answered {response.status_code}")
    return json_body(response, provider)


def _page_body(api: OAuthApi, response: requests.Response, now: datetime) -> dict[str, Any]:
    status = response.status_code
    raise_for_transient(status, response.headers, api.provider, now)
    if status == 401:
        raise NeedsReauth(f"{api.provider}: access token refused after a refresh; reconnect needed")
    if status == 403 and api.is_rate_limit_403(response):
        raise RetryLater(
            f"{api.provider}: rate limited (403)", retry_after_delay(response.headers, now)
        )
    if status == 403:
        raise ProviderError(f"{api.provider}: access to the calendar is forbidden (403)")
    if status == 404:
        raise ProviderError(f"{api.provider}: calendar not found (404)")
    return answer_body(api, response, api.operation)
