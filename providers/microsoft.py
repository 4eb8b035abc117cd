"""Microsoft Graph: ``calendarView`` over the sweep's window, every run (a delta link is
bound to its first range, and ours moves); absence deletes. Times are asked for in UTC;
an all-day event is its date, from midnight in the owner's zone.
Refresh tokens rotate: each refresh's new refresh token is stored.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, tzinfo
from typing import Any
from urllib.parse import quote, urlencode

import requests
from django.conf import settings
from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

from providers import meeting_links, oauth
from providers import normalize as n
from providers.base import (
    ConnectionSnapshot,
    FetchResult,
    MalformedPayload,
    ProviderEvent,
)
from providers.oauth import OAuthApi, answer_body, api_call, fetch_pages

NAME = "microsoft"
SCOPE = "offline_access Calendars.Read User.Read"
AUTHORIZE_PARAMS = {"response_mode": "query"}
PAGE_SIZE = 500
SELECT = (
    "id,subject,start,end,isAllDay,isCancelled,isReminderOn,reminderMinutesBeforeStart,"
    "responseStatus,seriesMasterId,originalStart,type,showAs,location,onlineMeeting,"
    "onlineMeetingUrl"
)


def _calendar_path(calendar_id: str) -> str:
    """The calendar under Graph's base: the user's default one, or one by its id."""
    if calendar_id in ("", "primary"):
        return "me"
    return f"me/calendars/{quote(calendar_id, safe='')}"


def _on_configured_graph(url: str) -> bool:
    """Whether ``url`` has the configured Graph scheme, host and port (and no userinfo),
    read with the parser ``requests`` sends by, so both agree where the bearer token goes."""
    try:
        link, graph = parse_url(url), parse_url(settings.MICROSOFT_GRAPH_BASE_URL)
    except LocationParseError:
        return False
    same_place = (link.scheme, link.host, link.port) == (graph.scheme, graph.host, graph.port)
    return same_place and link.auth is None


def _next_page(body: dict[str, Any], _first: str) -> str | None:
    """The page's ``@odata.nextLink``, a whole URL with its query; None on the last page."""
    link = body.get("@odata.nextLink")
    if not link:
        return None
    if not isinstance(link, str) or not _on_configured_graph(link):
        # Never send the bearer token anywhere we were not configured for.
        raise MalformedPayload("microsoft: @odata.nextLink points elsewhere")
    return link


def oauth_api() -> OAuthApi:
    """Microsoft's endpoints, ``calendarView`` the list; built per use, as settings can change."""
    login = f"{settings.MICROSOFT_LOGIN_BASE_URL.rstrip('/')}/{settings.MICROSOFT_TENANT}"
    return OAuthApi(
        provider=NAME,
        authorize_url=f"{login}/oauth2/v2.0/authorize",
        token_url=f"{login}/oauth2/v2.0/token",
        client_id=settings.MICROSOFT_CLIENT_ID,
        client_secret=settings.MICROSOFT_CLIENT_SECRET,
        base_url=settings.MICROSOFT_GRAPH_BASE_URL.rstrip("/"),
        operation="calendarView",
        items_key="value",
        next_page=_next_page,
        scope=SCOPE,
        headers={"Prefer": 'outlook.timezone="UTC"'},
    )


def fetch(
    snapshot: ConnectionSnapshot,
    *,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
) -> FetchResult:
    params = {
        "startDateTime": n.utc_text(window_start),
        "endDateTime": n.utc_text(window_end),
        "$select": SELECT,
        "$top": PAGE_SIZE,
    }
    api = oauth_api()
    owner_zone = n.zone_or_none(snapshot.owner_timezone)
    path = f"{_calendar_path(snapshot.calendar_id)}/calendarView"
    first = f"{api.base_url}/{path}?{urlencode(params)}"
    return oauth.window_events(
        api,
        fetch_pages(api, first, snapshot, now),
        window_start,
        window_end,
        cancelled=lambda item: n.require_bool(item.get("isCancelled"), "isCancelled"),
        event=lambda item: _event(item, snapshot.config.meeting_hosts, owner_zone),
    )


def _when(value: Any, name: str) -> datetime:
    """A Graph dateTimeTimeZone; we ask for UTC, but honour an IANA zone if one comes back."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} is not an object")
    zone_name = value.get("timeZone")
    zone = n.zone_or_none(zone_name)
    if zone is None and zone_name not in (None, "", "UTC", "tzone://Microsoft/Utc"):
        raise ValueError(f"{name} is in an unknown time zone")
    return n.parse_datetime(value.get("dateTime"), name, zone)


def _day(value: Any, name: str, owner_zone: tzinfo | None) -> datetime:
    """An all-day event's start or end: Graph gives midnight of the date in whatever zone
    (it does not convert them), so the date is read and starts at midnight where the owner is."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} is not an object")
    day = date.fromisoformat(n.require_str(value.get("dateTime"), name)[:10])
    return n.as_utc(day, owner_zone)


def _event(
    item: dict[str, Any], meeting_hosts: tuple[str, ...], owner_zone: tzinfo | None
) -> ProviderEvent:
    own_id = n.require_str(item.get("id"), "id")
    series_id = item.get("seriesMasterId")
    all_day = n.require_bool(item.get("isAllDay"), "isAllDay")
    when = (lambda v, name: _day(v, name, owner_zone)) if all_day else _when
    starts_at = when(item.get("start"), "start")
    ends_at = when(item["end"], "end") if item.get("end") is not None else None
    occurrence_start = None
    if series_id is not None:
        n.require_str(series_id, "seriesMasterId")
        occurrence_start = n.parse_datetime(item.get("originalStart"), "originalStart")
    leads: tuple[int, ...] = ()
    if n.require_bool(item.get("isReminderOn"), "isReminderOn"):
        leads = (n.require_minutes(item.get("reminderMinutesBeforeStart"), "reminderMinutes"),)
    response_status = item.get("responseStatus") or {}
    if not isinstance(response_status, dict):
        raise TypeError("responseStatus is not an object")
    response = response_status.get("response")
    tentative = response == "tentativelyAccepted" or item.get("showAs") == "tentative"
    location = item.get("location")
    display_name = location.get("displayName") if isinstance(location, dict) else None
    online = item.get("onlineMeeting")
    online_join = online.get("joinUrl") if isinstance(online, dict) else None
    return ProviderEvent(
        provider_event_id=n.event_id(series_id or own_id),
        occurrence_start=occurrence_start,
        title=n.title(item.get("subject")),
        starts_at=starts_at,
        ends_at=ends_at,
        all_day=all_day,
        status="tentative" if tentative else "confirmed",
        declined=response == "declined",
        reminder_minutes=leads,
        location=meeting_links.stored_location(display_name),
        join_url=meeting_links.join_url(
            [online_join, item.get("onlineMeetingUrl"), display_name], meeting_hosts
        ),
    )


def account_name(access_token: str, timeout: float) -> str:
    """The signed-in user's address, shown as the connection's label."""
    url = f"{settings.MICROSOFT_GRAPH_BASE_URL.rstrip('/')}/me"
    params = {"$select": "mail,userPrincipalName"}
    body = oauth.account_body(NAME, url, access_token, timeout, "/me", params=params)
    return (n.optional_str(body.get("mail")) or n.optional_str(body.get("userPrincipalName")))[:255]


# Push. Outlook events allow at most 4,230 minutes; a little less leaves room for clock skew.
SUBSCRIPTION_MINUTES = 4200


def _subscription(response: requests.Response, operation: str) -> tuple[str, datetime]:
    body = answer_body(oauth_api(), response, operation, ok=(200, 201))
    try:
        return (
            n.require_str(body.get("id"), "id"),
            n.parse_datetime(body.get("expirationDateTime"), "expirationDateTime"),
        )
    except (KeyError, TypeError, ValueError):
        raise MalformedPayload(f"microsoft: {operation} answer lacks id/expiry") from None


def subscribe(
    snapshot: ConnectionSnapshot,
    *,
    notification_url: str,
    lifecycle_url: str,
    client_state: str,
    now: datetime,
) -> tuple[str, datetime]:
    """``POST /subscriptions`` on the calendar's events: (subscription id, expiry), once
    Graph has validated ``notification_url`` (our endpoint echoes the validationToken)."""
    payload = {
        "changeType": "created,updated,deleted",
        "notificationUrl": notification_url,
        "lifecycleNotificationUrl": lifecycle_url,
        "resource": f"{_calendar_path(snapshot.calendar_id)}/events",
        "expirationDateTime": n.utc_text(now + timedelta(minutes=SUBSCRIPTION_MINUTES)),
        "clientState": client_state,
    }
    response = api_call(oauth_api(), snapshot, "POST", "/subscriptions", now, payload)
    return _subscription(response, "POST /subscriptions")


def get_subscription(
    snapshot: ConnectionSnapshot, subscription_id: str, now: datetime, *, renew: bool = False
) -> tuple[str, datetime] | None:
    """``GET /subscriptions/{id}``, or with ``renew`` a ``PATCH`` with a new expiry (which also
    answers reauthorizationRequired): (id, expiry) as Graph knows it now, or None when Graph
    no longer knows the subscription (404), which must then be made again."""
    method, payload = "GET", None
    if renew:
        expiry = now + timedelta(minutes=SUBSCRIPTION_MINUTES)
        method, payload = "PATCH", {"expirationDateTime": n.utc_text(expiry)}
    path = f"/subscriptions/{quote(subscription_id, safe='')}"
    response = api_call(oauth_api(), snapshot, method, path, now, payload)
    if response.status_code == 404:
        return None
    return _subscription(response, f"{method} /subscriptions")


def delete_subscription(snapshot: ConnectionSnapshot, subscription_id: str, now: datetime) -> bool:
    """``DELETE /subscriptions/{id}``; True when deleted or already unknown (404)."""
    path = f"/subscriptions/{quote(subscription_id, safe='')}"
    response = api_call(oauth_api(), snapshot, "DELETE", path, now)
    return response.status_code in (200, 204, 404)
