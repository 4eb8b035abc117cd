"""Google Calendar API v3: ``events.list`` over the sweep's window, every run (not
``syncToken``, which cannot be bounded by ``timeMin``/``timeMax``); absence deletes.
Reminders: ``popup`` overrides, or with ``useDefault`` the calendar's defaults; none is
an empty list ("use the user's default lead"). Working locations are not events.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, tzinfo
from typing import Any
from urllib.parse import quote, urlencode

import requests
from django.conf import settings

from providers import meeting_links, oauth
from providers import normalize as n
from providers.base import (
    ConnectionSnapshot,
    FetchResult,
    MalformedPayload,
    ProviderEvent,
)
from providers.oauth import OAuthApi, answer_body, api_call, fetch_pages

logger = logging.getLogger("nudge.calendars.google")

NAME = "google"
SCOPE = "https://www.googleapis.com/auth/calendar.readonly"
# offline + consent: Google sends a refresh token only on a fresh consent.
AUTHORIZE_PARAMS = {"access_type": "offline", "prompt": "consent"}
PAGE_SIZE = 2500  # the API's maximum: a day of events is always one page
_RATE_LIMIT_REASONS = {"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded"}


def _next_page(body: dict[str, Any], first: str) -> str | None:
    """The first page's query with this page's ``nextPageToken``; None on the last page."""
    token = body.get("nextPageToken")
    if not token:
        return None
    if not isinstance(token, str):
        raise MalformedPayload("google: nextPageToken is not a string")
    return f"{first}&{urlencode({'pageToken': token})}"


def _events_path(snapshot: ConnectionSnapshot) -> str:
    calendar = quote(snapshot.calendar_id or "primary", safe="@.")
    return f"/calendars/{calendar}/events"


def _is_rate_limit_403(response: requests.Response) -> bool:
    """Google answers some rate limits with 403 and says so only in the error's reason."""
    try:
        errors = response.json()["error"]["errors"]
        reasons = {e["reason"] for e in errors if isinstance(e.get("reason"), str)}
    except (ValueError, KeyError, TypeError):
        return False
    return bool(reasons & _RATE_LIMIT_REASONS)


def oauth_api() -> OAuthApi:
    """Google's endpoints, ``events.list`` the list; built per use, as settings can change."""
    return OAuthApi(
        provider=NAME,
        authorize_url=settings.GOOGLE_AUTH_URL,
        token_url=settings.GOOGLE_TOKEN_URL,
        client_id=settings.GOOGLE_CLIENT_ID,
        client_secret=settings.GOOGLE_CLIENT_SECRET,
        base_url=settings.GOOGLE_API_BASE_URL.rstrip("/"),
        operation="events.list",
        items_key="items",
        next_page=_next_page,
        is_rate_limit_403=_is_rate_limit_403,
    )


def fetch(
    snapshot: ConnectionSnapshot,
    *,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
) -> FetchResult:
    params = {
        "timeMin": n.utc_text(window_start),
        "timeMax": n.utc_text(window_end),
        "singleEvents": "true",
        "maxResults": PAGE_SIZE,
    }
    api = oauth_api()
    first = f"{api.base_url}{_events_path(snapshot)}?{urlencode(params)}"
    pages = fetch_pages(api, first, snapshot, now)
    # Every page repeats the calendar's default reminders and zone.
    zone = n.zone_or_none(pages[0].get("timeZone"))
    defaults = _default_reminders(pages[0].get("defaultReminders"))
    hosts = snapshot.config.meeting_hosts
    return oauth.window_events(
        api,
        pages,
        window_start,
        window_end,
        cancelled=lambda item: item.get("status") == "cancelled" or _is_working_location(item),
        event=lambda item: _event(item, defaults, zone, hosts),
    )


def _is_working_location(item: dict[str, Any]) -> bool:
    """A working location ("Office, 9 to 17"), which events.list returns with the events:
    where the person is, not something that starts. Left out like a cancelled event."""
    return item.get("eventType") == "workingLocation"


def _default_reminders(value: Any) -> tuple[int, ...]:
    try:
        return _popup_minutes(value or [])
    except (KeyError, TypeError, ValueError):
        logger.warning("google: unusable defaultReminders; ignoring them")
        return ()


def _popup_minutes(reminders: Any) -> tuple[int, ...]:
    if not isinstance(reminders, list):
        raise TypeError("reminders is not a list")
    return n.sorted_leads(
        {
            n.require_minutes(r.get("minutes"), "reminder minutes")
            for r in reminders
            if isinstance(r, dict) and r.get("method") == "popup"
        }
    )


def _when(value: Any, name: str, zone: tzinfo | None) -> tuple[datetime, bool]:
    """(instant, all_day) of a Google ``start``/``end``/``originalStartTime``."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} is not an object")
    if "dateTime" in value:
        own_zone = n.zone_or_none(value.get("timeZone"))
        return n.parse_datetime(value["dateTime"], name, own_zone), False
    if "date" in value:
        day = date.fromisoformat(n.require_str(value["date"], name))
        return n.as_utc(day, zone), True
    raise KeyError(f"{name} has neither dateTime nor date")


def _video_entry_points(item: dict[str, Any]) -> list[object]:
    """The ``uri`` of each video entry point of ``conferenceData`` (Meet, or an add-on's)."""
    conference = item.get("conferenceData")
    points = conference.get("entryPoints") if isinstance(conference, dict) else None
    if not isinstance(points, list):
        return []
    return [
        point.get("uri")
        for point in points
        if isinstance(point, dict) and point.get("entryPointType") == "video"
    ]


def _event(
    item: dict[str, Any],
    defaults: tuple[int, ...],
    zone: tzinfo | None,
    meeting_hosts: tuple[str, ...],
) -> ProviderEvent:
    own_id = n.require_str(item.get("id"), "id")
    series_id = item.get("recurringEventId")
    starts_at, all_day = _when(item.get("start"), "start", zone)
    ends_at = _when(item["end"], "end", zone)[0] if "end" in item else None
    occurrence_start = None
    if series_id is not None:
        occurrence_start = _when(item.get("originalStartTime"), "originalStartTime", zone)[0]
    reminders = item.get("reminders") or {}
    if not isinstance(reminders, dict):
        raise TypeError("reminders is not an object")
    if n.require_bool(reminders.get("useDefault"), "reminders.useDefault"):
        leads = defaults
    else:
        leads = _popup_minutes(reminders.get("overrides") or [])
    attendees = item.get("attendees") or []
    if not isinstance(attendees, list):
        raise TypeError("attendees is not a list")
    declined = any(
        isinstance(a, dict) and a.get("self") is True and a.get("responseStatus") == "declined"
        for a in attendees
    )
    status = item.get("status") or "confirmed"
    if status not in ("confirmed", "tentative"):
        raise ValueError(f"unknown status {status!r}")
    return ProviderEvent(
        provider_event_id=n.event_id(
            n.require_str(series_id, "recurringEventId") if series_id is not None else own_id
        ),
        occurrence_start=occurrence_start,
        title=n.title(item.get("summary")),
        starts_at=starts_at,
        ends_at=ends_at,
        all_day=all_day,
        status=status,
        declined=declined,
        reminder_minutes=leads,
        location=meeting_links.stored_location(item.get("location")),
        join_url=meeting_links.join_url(
            [
                *_video_entry_points(item),
                item.get("hangoutLink"),
                item.get("location"),
                item.get("description"),
            ],
            meeting_hosts,
        ),
    )


def account_name(access_token: str, timeout: float) -> str:
    """The connected account's address (the primary calendar's id), shown as its label."""
    url = f"{settings.GOOGLE_API_BASE_URL.rstrip('/')}/calendars/primary"
    body = oauth.account_body(NAME, url, access_token, timeout, "the primary calendar")
    return n.optional_str(body.get("id"))[:255]


# Push. The channel life asked for; Google may grant less, and says so in ``expiration``.
WATCH_TTL_SECONDS = 7 * 24 * 3600


def watch(
    snapshot: ConnectionSnapshot,
    *,
    channel_id: str,
    token: str,
    address: str,
    now: datetime,
) -> tuple[str, datetime]:
    """``events.watch`` on the connection's calendar: (resourceId, expiration)."""
    payload = {
        "id": channel_id,
        "type": "web_hook",
        "address": address,
        "token": token,
        "params": {"ttl": str(WATCH_TTL_SECONDS)},
    }
    api = oauth_api()
    response = api_call(api, snapshot, "POST", f"{_events_path(snapshot)}/watch", now, payload)
    body = answer_body(api, response, "events.watch")
    try:
        resource_id = n.require_str(body.get("resourceId"), "resourceId")
        expiration = datetime.fromtimestamp(int(body["expiration"]) / 1000, UTC)
    except (KeyError, TypeError, ValueError):
        raise MalformedPayload("google: events.watch answer lacks resourceId/expiration") from None
    return resource_id, expiration


def stop_channel(
    snapshot: ConnectionSnapshot, *, channel_id: str, resource_id: str, now: datetime
) -> bool:
    """``channels.stop``; True when Google stopped it or no longer knows it (404)."""
    payload = {"id": channel_id, "resourceId": resource_id}
    response = api_call(oauth_api(), snapshot, "POST", "/channels/stop", now, payload)
    return response.status_code in (200, 204, 404)


def revoke_grant(refresh_token: str, timeout: float) -> bool:
    """Revoke the grant (RFC 7009); True when Google did, or it was already gone."""
    try:
        response = requests.post(
            settings.GOOGLE_REVOKE_URL, data={"token": refresh_token}, timeout=timeout
        )
    except requests.RequestException as exc:
        logger.warning("Google token revocation failed", extra={"error": type(exc).__name__})
        return False
    return response.status_code in (200, 400)  # 400 invalid_token: nothing left to revoke
