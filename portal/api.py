"""The JSON API for the host product: follow-ups and calendars, authenticated by
``Authorization: Bearer nudge_<user id>_<secret>`` (never a session cookie: no CSRF exposure).
Bad input is a 400 with one message and nothing written. No endpoint calls a calendar server;
a CalDAV password is accepted, never returned. ``NUDGE_API_REQUESTS_PER_MINUTE`` per account
are counted in a fixed minute on the account's own row (a new token starts no fresh minute)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from accounts.actions import ensure_settings
from calendars.caldav_connect import (
    add_account,
    choices_of,
    choose_calendars,
    renew_password,
)
from calendars.connect import ConnectError
from calendars.models import CalendarConnection, ConnectionStatus, Provider
from core import json_input
from core.bearer import bearer_token
from core.config import NudgeConfig
from followups import actions as followups
from followups.actions import FollowUpChange, FollowUpInvalid, Schedule, api_instant
from followups.repeat import WEEKDAY_NAMES
from portal import calendar_links, statements
from portal.openapi import BODIES, PATHS, SCHEDULE, schema
from portal.tokens import api_token_is_live, parse_api_token
from tenancy.scope import tenant_scope, tenant_statements

MAX_BODY_BYTES = 16 * 1024
JSON_TYPES = {"string": str, "boolean": bool, "array": list}
JSON_TYPE_WORDS = {str: "a string", bool: "true or false", list: "an array"}
RATE_WINDOW = timedelta(minutes=1)
ENDPOINTS: dict[str, Callable] = {}  # the schema's paths -> their views (``machine_urls``)


class BadRequest(Exception):
    pass


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JsonResponse:
    return JsonResponse({"error": message}, status=status, headers=headers)


def token_owner(request: HttpRequest) -> int | None:
    """The user id the request's bearer token belongs to, when the token is live."""
    owned = parse_api_token(bearer_token(request))
    if owned is None:
        return None
    with tenant_scope(owned.user_id):
        live = api_token_is_live(owned, timezone.now())
        if live:
            ensure_settings(owned.user_id)  # a first API call is a first visit too
    return owned.user_id if live else None


def seconds_to_wait(user_id: int, now: datetime, config: NudgeConfig) -> int | None:
    """Count this request against its account (the token's owner, already checked by
    the caller); the seconds to wait when over the limit, else None."""
    [[(window_at, requests)]] = tenant_statements(
        user_id,
        [statements.COUNT_API_REQUEST],
        {"user_id": user_id, "now": now, "window": RATE_WINDOW},
        # A count lost in a server crash costs nothing worth a disk flush per request.
        relaxed_commit=True,
    )
    if requests <= config.api_requests_per_minute:
        return None
    return max(1, math.ceil((window_at + RATE_WINDOW - now).total_seconds()))


def api_view(route: str) -> Callable:
    """The endpoint of the schema's ``route``: token authentication, the methods the schema
    lists for it, the rate limit and JSON errors around its view."""
    methods = [method.upper() for method in PATHS[route] if method != "parameters"]

    def decorate(view: Callable) -> Callable:
        @csrf_exempt
        @never_cache
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if request.method not in methods:
                return error(405, f"use {', '.join(methods)}", {"Allow": ", ".join(methods)})
            user_id = token_owner(request)
            if user_id is None:
                return error(
                    401,
                    "missing, unknown, expired or revoked API token",
                    {"WWW-Authenticate": "Bearer"},
                )
            wait = seconds_to_wait(user_id, timezone.now(), NudgeConfig.from_settings())
            if wait is not None:
                return error(429, "too many requests from this account", {"Retry-After": str(wait)})
            try:
                return view(request, user_id, *args, **kwargs)
            except (BadRequest, FollowUpInvalid, ConnectError) as exc:
                return error(400, str(exc))

        ENDPOINTS[route] = wrapper
        return wrapper

    return decorate


def request_body(request: HttpRequest, body: str) -> dict[str, Any]:
    """The request's JSON object: only the fields of the schema's ``body``, each of its type
    and among its ``enum`` (an array's items among theirs), its required ones present and at
    least its ``minProperties``."""
    allowed = BODIES[body]["properties"]
    if len(request.body) > MAX_BODY_BYTES:
        raise BadRequest(f"the body is larger than {MAX_BODY_BYTES} bytes")
    if not request.content_type.startswith("application/json"):
        raise BadRequest("send a JSON body with Content-Type: application/json")
    try:
        # 16 KiB of "[" would nest deeper than the parser's stack: refused, not a 500.
        data = json_input.parse(request.body)
    except json_input.JsonInputError as exc:
        raise BadRequest(str(exc)) from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise BadRequest(
            f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    for name, field in allowed.items():
        if name not in data:
            continue
        value, expected = data[name], JSON_TYPES[field["type"]]
        if type(value) is not expected:
            raise BadRequest(f"{name} must be {JSON_TYPE_WORDS[expected]}")
        if "enum" in field and value not in field["enum"]:
            raise BadRequest(f"{name} must be one of: {', '.join(field['enum'])}")
        among = field.get("items", {}).get("enum")
        if among and not all(item in among for item in value):
            raise BadRequest(f"{name} are among: {', '.join(among)}")
    missing = [name for name in BODIES[body]["required"] if name not in data]
    if missing:
        raise BadRequest(f"missing field(s): {', '.join(missing)}")
    if len(data) < BODIES[body].get("minProperties", 0):
        raise BadRequest(f"send at least one of: {', '.join(allowed)}")
    return data


def _instant(value: str) -> datetime:
    try:
        parsed = parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise FollowUpInvalid("due_at", "due_at must be an ISO 8601 date-time")
    return parsed


def _schedule(data: dict[str, Any]) -> Schedule | None:
    """The schedule fields the body gave (None when it gave none)."""
    if not set(data) & set(SCHEDULE):
        return None
    weekdays = data.get("repeat_weekdays")
    return Schedule(
        repeat=data.get("repeat"),
        repeat_weekdays=[WEEKDAY_NAMES.index(day) for day in weekdays]
        if weekdays is not None
        else None,
        time_zone=data.get("time_zone"),
        reminder_minutes=data.get("reminder_minutes"),
    )


@api_view("/api/follow-ups")
def follow_ups(request: HttpRequest, user_id: int) -> JsonResponse:
    now = timezone.now()
    if request.method == "GET":
        done = request.GET.get("done")
        if done not in (None, "true", "false"):
            raise BadRequest("done must be true or false")
        rows = followups.list_follow_ups(user_id, done=None if done is None else done == "true")
        return JsonResponse({"follow_ups": [followups.as_json(f, now) for f in rows]})
    data = request_body(request, "FollowUpCreate")
    created = followups.create_follow_up(
        user_id,
        data["title"],
        _instant(data["due_at"]),
        now,
        NudgeConfig.from_settings(),
        _schedule(data) or Schedule(),
    )
    return JsonResponse(followups.as_json(created, now), status=201)


@api_view("/api/follow-ups/{id}")
def follow_up(request: HttpRequest, user_id: int, pk: int) -> HttpResponse:
    now = timezone.now()
    if request.method == "GET":
        found = followups.get_follow_up(user_id, pk)
    elif request.method == "DELETE":
        if followups.delete_follow_up(user_id, pk, now):
            return HttpResponse(status=204)
        found = None
    else:
        data = request_body(request, "FollowUpPatch")
        change = FollowUpChange(
            title=data.get("title"),
            due_at=_instant(data["due_at"]) if "due_at" in data else None,
            done=data.get("done"),
            schedule=_schedule(data),
        )
        found = followups.change_follow_up(user_id, pk, change, now, NudgeConfig.from_settings())
    if found is None:
        return error(404, "no such follow-up")
    return JsonResponse(followups.as_json(found, now))


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
        "last_synced_at": api_instant(connection.last_synced_at),
        "choices": [
            {"url": c["url"], "name": str(c.get("name", ""))} for c in choices_of(connection)
        ],
    }


@api_view("/api/calendars")
def calendars(request: HttpRequest, user_id: int) -> JsonResponse:
    rows = calendar_links.list_connections(user_id)
    return JsonResponse({"calendars": [as_json(c) for c in rows]})


@api_view("/api/calendars/caldav")
def caldav_connect(request: HttpRequest, user_id: int) -> JsonResponse:
    data = request_body(request, "CalDavConnect")
    # The body's fields are the account's (``server_url`` only where the preset has none).
    fields = {"server_url": "", **data}
    created = add_account(user_id, **fields, config=NudgeConfig.from_settings())
    return JsonResponse(as_json(created), status=202)


@api_view("/api/calendars/{id}/caldav/choose")
def caldav_choose(request: HttpRequest, user_id: int, pk: int) -> JsonResponse:
    data = request_body(request, "CalDavChoose")
    urls = data["calendars"]
    if not all(isinstance(url, str) for url in urls):
        raise BadRequest("calendars must be an array of the choices' urls")
    rows = choose_calendars(user_id, pk, urls, config=NudgeConfig.from_settings())
    if rows is None:
        return error(404, "no calendar of this id is waiting for a choice")
    return JsonResponse({"calendars": [as_json(c) for c in rows]})


@api_view("/api/calendars/{id}/caldav/password")
def caldav_password(request: HttpRequest, user_id: int, pk: int) -> JsonResponse:
    data = request_body(request, "CalDavPassword")
    if not data["password"]:
        raise BadRequest("missing field(s): password")
    found = renew_password(user_id, pk, data["password"])
    if found is None:
        return error(404, "no CalDAV calendar of this id")
    return JsonResponse(as_json(found))


@csrf_exempt
@never_cache
def not_found(request: HttpRequest) -> JsonResponse:
    """An address under /api/ that names no endpoint: a JSON 404 a client can read."""
    return error(404, "no such endpoint; see /api/schema")


@never_cache
def api_schema(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schema(request.build_absolute_uri("/")), json_dumps_params={"indent": 2})
