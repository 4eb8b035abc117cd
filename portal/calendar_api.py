"""The JSON API's calendars: list them, and connect a CalDAV account as the Calendars page
does. No endpoint calls a calendar server; a password is accepted, never returned."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from calendars.caldav_connect import (
    PRESETS,
    add_account,
    choices_of,
    choose_calendars,
    renew_password,
)
from calendars.connect import ConnectError
from calendars.models import CalendarConnection, ConnectionStatus, Provider
from core.config import NudgeConfig
from portal import calendar_links
from portal.api import BadRequest, api_view, error, request_body
from portal.openapi import BODIES


def state_of(connection: CalendarConnection) -> str:
    """One word for what the person would see on the Calendars page."""
    caldav = connection.provider == Provider.CALDAV
    if connection.status == ConnectionStatus.NEEDS_REAUTH:
        return "needs_password" if caldav else "needs_reauth"
    if connection.status == ConnectionStatus.ERROR:
        return "error"
    if choices_of(connection):
        return "choose_calendars"
    if connection.last_synced_at is None and connection.provider != Provider.LOCAL:
        return "checking"
    return "active"


def as_json(connection: CalendarConnection) -> dict[str, object]:
    return {
        "id": connection.pk,
        "provider": connection.provider,
        "account": connection.account,
        "name": str((connection.sync_state or {}).get("name", "")),
        "state": state_of(connection),
        "nudges_on": connection.nudges_on,
        "skip_all_day": connection.skip_all_day,
        "last_synced_at": connection.last_synced_at.isoformat()
        if connection.last_synced_at
        else None,
        "choices": [
            {"url": c["url"], "name": str(c.get("name", ""))} for c in choices_of(connection)
        ],
    }


@api_view("GET")
def calendars(request: HttpRequest, user_id: int) -> JsonResponse:
    rows = calendar_links.list_connections(user_id)
    return JsonResponse({"calendars": [as_json(c) for c in rows]})


@api_view("POST")
def caldav_connect(request: HttpRequest, user_id: int) -> JsonResponse:
    data = request_body(request, "CalDavConnect")
    missing = [name for name in BODIES["CalDavConnect"]["required"] if not data.get(name)]
    if missing:
        raise BadRequest(f"missing field(s): {', '.join(missing)}")
    if data["preset"] not in PRESETS:
        raise BadRequest(f"preset is one of: {', '.join(PRESETS)}")
    try:
        # The body's fields are the account's (``server_url`` only where the preset has none).
        fields = {"server_url": "", **data}
        created = add_account(user_id, **fields, config=NudgeConfig.from_settings())
    except ConnectError as exc:
        raise BadRequest(str(exc)) from None
    return JsonResponse(as_json(created), status=202)


@api_view("POST")
def caldav_choose(request: HttpRequest, user_id: int, connection_id: int) -> JsonResponse:
    data = request_body(request, "CalDavChoose")
    urls = data.get("calendars") or []
    if not all(isinstance(url, str) for url in urls):
        raise BadRequest("calendars must be an array of the choices' urls")
    try:
        rows = choose_calendars(user_id, connection_id, urls, config=NudgeConfig.from_settings())
    except ConnectError as exc:
        raise BadRequest(str(exc)) from None
    if rows is None:
        return error(404, "no calendar of this id is waiting for a choice")
    return JsonResponse({"calendars": [as_json(c) for c in rows]})


@api_view("POST")
def caldav_password(request: HttpRequest, user_id: int, connection_id: int) -> JsonResponse:
    data = request_body(request, "CalDavPassword")
    if not data.get("password"):
        raise BadRequest("missing field(s): password")
    found = renew_password(user_id, connection_id, data["password"])
    if found is None:
        return error(404, "no CalDAV calendar of this id")
    return JsonResponse(as_json(found))
