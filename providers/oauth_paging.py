"""Reading a paged list from an OAuth-protected calendar API (Google, Microsoft Graph).

The token is refreshed when due and once more after a 401, never twice (Microsoft rotates
refresh tokens), so a second 401 is NeedsReauth. 429, 5xx and a rate-limit 403 are
RetryLater; other statuses ProviderError; a page that is not a JSON object with a list,
MalformedPayload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import requests

from providers import oauth
from providers.base import (
    ConnectionSnapshot,
    MalformedPayload,
    NeedsReauth,
    ProviderError,
    RetryLater,
    json_body,
    provider_request,
    raise_for_transient,
    retry_after_delay,
    time_left,
)

# One page holds a normal calendar's whole window; beyond this the answer is refused as
# malformed, so a provider that keeps naming a next page cannot spend the sync budget.
# The retry after a 401 is not counted.
MAX_PAGES = 4


@dataclass(frozen=True)
class PageRequest:
    """Where one page is: a URL and the query parameters to send with it, if any."""

    url: str
    params: Mapping[str, Any] | None = None


def _never(_response: requests.Response) -> bool:
    return False


@dataclass(frozen=True)
class PagedListApi:
    """What one provider's list endpoint does its own way; the loop is :func:`fetch_pages`."""

    provider: str
    operation: str  # the endpoint as errors name it, e.g. "events.list"
    items_key: str  # where a page keeps its list
    token_endpoint: oauth.TokenEndpoint
    # None on the last page; MalformedPayload for a next page that must not be followed.
    next_page: Callable[[dict[str, Any], PageRequest], PageRequest | None]
    headers: Mapping[str, str] = field(default_factory=dict)
    is_rate_limit_403: Callable[[requests.Response], bool] = _never


@dataclass
class Pages:
    """Every page's list joined in order, and each page's body for what else it carries."""

    items: list[Any]
    bodies: list[dict[str, Any]]


def fetch_pages(
    api: PagedListApi, first: PageRequest, snapshot: ConnectionSnapshot, now: datetime
) -> Pages:
    """Every page of the list; raises ProviderError (see the module docstring)."""
    oauth.ensure_fresh_token(api.token_endpoint, snapshot, now)
    pages = Pages(items=[], bodies=[])
    refreshed_after_401 = False
    request: PageRequest | None = first
    while request is not None:
        if len(pages.bodies) == MAX_PAGES:
            raise MalformedPayload(f"{api.provider}: more than {MAX_PAGES} pages for one window")
        response = _get(api, request, snapshot)
        if response.status_code == 401 and not refreshed_after_401:
            refreshed_after_401 = True
            oauth.refresh(api.token_endpoint, snapshot, now)
            response = _get(api, request, snapshot)
        body = _page_body(api, response, now)
        page_items = body.get(api.items_key, [])
        if not isinstance(page_items, list):
            raise MalformedPayload(
                f"{api.provider}: {api.operation} '{api.items_key}' is not a list"
            )
        pages.items.extend(page_items)
        pages.bodies.append(body)
        request = api.next_page(body, request)
    return pages


def _get(
    api: PagedListApi, request: PageRequest, snapshot: ConnectionSnapshot
) -> requests.Response:
    """One page, with the current access token, inside the connection's time budget."""
    return provider_request(
        api.provider,
        "GET",
        request.url,
        params=request.params,
        headers={**api.headers, "Authorization": f"Bearer {snapshot.access_token}"},
        secrets=snapshot.secrets(),
        paced_for=snapshot,
        is_rate_limit_403=api.is_rate_limit_403,
        timeout=min(
            snapshot.config.calendar_http_timeout_seconds, time_left(snapshot, api.provider)
        ),
    )


def _page_body(api: PagedListApi, response: requests.Response, now: datetime) -> dict[str, Any]:
    """The page as a JSON object, or the ProviderError its status stands for."""
    raise_for_transient(response, api.provider, now)
    status = response.status_code
    if status == 401:
        raise NeedsReauth(f"{api.provider}: access token refused after a refresh; reconnect needed")
    if status == 403 and api.is_rate_limit_403(response):
        raise RetryLater(f"{api.provider}: rate limited (403)", retry_after_delay(response, now))
    if status == 403:
        raise ProviderError(f"{api.provider}: access to the calendar is forbidden (403)")
    if status == 404:
        raise ProviderError(f"{api.provider}: calendar not found (404)")
    if status != 200:
        raise ProviderError(f"{api.provider}: {api.operation} answered HTTP {status}")
    return json_body(response, api.provider)
