"""The OpenAPI 3.1 description of the follow-ups and calendars API, served at ``GET /api/schema``;
written by hand. The API's routes and methods are its paths (``api.api_view``) and its bodies'
checks read its request schemas; a test checks it lists every status the API answers."""

from __future__ import annotations

from typing import Any

from calendars.caldav_connect import PRESETS
from calendars.models import Provider
from core.config import SCHEMA_MAX_LEAD_MINUTES
from followups.actions import TITLE_MAX_CHARS
from followups.repeat import WEEKDAY_NAMES, Repeat
from providers.normalize import MAX_LEADS_PER_EVENT


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(name)}}


def _answer(description: str, name: str = "Error") -> dict[str, Any]:
    return {"description": description, "content": _json(name)}


def _list_of(key: str, name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {key: {"type": "array", "items": _ref(name)}}}


def _object(properties: dict[str, Any], required=None, **more: Any) -> dict[str, Any]:
    """An object's schema; every property is required unless ``required`` names some."""
    required = list(properties if required is None else required)
    return {"type": "object", "required": required, "properties": properties, **more}


def _body(properties: dict[str, Any], *required: str, **more: Any) -> dict[str, Any]:
    """A request body's schema: these properties and no others."""
    return _object(properties, required, additionalProperties=False, **more)


def _operation(summary: str, answers: dict[str, Any], body: str = "", **more: Any) -> dict:
    """An operation answering ``answers`` or 401; ``body`` names its request's schema."""
    if body:
        more["requestBody"] = {"required": True, "content": _json(body)}
    return {"summary": summary, **more, "responses": {**answers, "401": UNAUTHORIZED}}


STRING = {"type": "string"}
INSTANT = {"type": "string", "format": "date-time", "description": "In UTC (ending Z)."}
ID_PARAMETER = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}
TITLE = {"type": "string", "minLength": 1, "maxLength": TITLE_MAX_CHARS}
DUE_AT = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601 with a UTC offset, in the future (a naive time is refused).",
}
REPEAT = {
    "type": "string",
    "enum": ["once", *(value for value in Repeat.values if value)],
    "default": "once",
    "description": "once; daily; weekdays (Monday to Friday); weekly on repeat_weekdays; "
    "monthly on due_at's day of the month (months without that day are skipped). Each "
    "occurrence keeps due_at's local time in time_zone, across daylight-saving changes; "
    "due_at is the first occurrence, and done ends the series.",
}
REPEAT_WEEKDAYS = {
    "type": "array",
    "items": {"type": "string", "enum": list(WEEKDAY_NAMES)},
    "uniqueItems": True,
    "description": "The days of a weekly follow-up (required for weekly, ignored otherwise).",
}
TIME_ZONE = {
    "type": "string",
    "description": "The IANA zone whose wall clock a repeating follow-up keeps; "
    "by default the owner's zone from their settings.",
}
REMINDER_MINUTES = {
    "type": "array",
    "items": {"type": "integer", "minimum": 0, "maximum": SCHEMA_MAX_LEAD_MINUTES},
    "maxItems": MAX_LEADS_PER_EVENT,
    "uniqueItems": True,
    "description": "Nudge this many minutes before each occurrence, once per value "
    "(0 is at the time; at most NUDGE_MAX_LEAD_MINUTES). Empty or absent: the owner's "
    "default lead.",
}
SCHEDULE = {
    "repeat": REPEAT,
    "repeat_weekdays": REPEAT_WEEKDAYS,
    "time_zone": TIME_ZONE,
    "reminder_minutes": REMINDER_MINUTES,
}
UNAUTHORIZED = _answer("Missing, unknown, expired or revoked token, or its owner is deactivated.")
STATES = ["active", "checking", "choose_calendars", "needs_password", "needs_reauth", "error"]
BAD_REQUEST = _answer(
    "Unknown fields, wrong types, a time without offset or in the past, a title too long, "
    "an unknown repeat, weekday or zone, or more reminders than allowed."
)
NOT_FOUND = _answer("No follow-up with this id belongs to the token's owner.")
# The request bodies: the API reads each body's fields, types, enums and required ones here.
BODIES = {
    "FollowUpCreate": _body({"title": TITLE, "due_at": DUE_AT, **SCHEDULE}, "title", "due_at"),
    "FollowUpPatch": _body(
        {"title": TITLE, "due_at": DUE_AT, "done": {"type": "boolean"}, **SCHEDULE},
        minProperties=1,
    ),
    "CalDavConnect": _body(
        {
            "preset": {"type": "string", "enum": list(PRESETS)},
            "server_url": {
                "type": "string",
                "description": "The server's address, for nextcloud and other.",
            },
            "username": STRING,
            "password": {
                "type": "string",
                "writeOnly": True,
                "description": "An app-specific password (iCloud: Apple ID → Sign-In "
                "and Security → App-Specific Passwords).",
            },
        },
        "preset",
        "username",
        "password",
    ),
    "CalDavChoose": _body({"calendars": {"type": "array", "items": STRING}}, "calendars"),
    "CalDavPassword": _body({"password": {"type": "string", "writeOnly": True}}, "password"),
}


PATHS = {
    "/api/follow-ups": {
        "get": _operation(
            "List follow-ups, open first, by due time",
            {"200": _answer("The follow-ups.", "FollowUpList"), "400": BAD_REQUEST},
            parameters=[{"name": "done", "in": "query", "schema": {"type": "boolean"}}],
        ),
        "post": _operation(
            "Create a follow-up",
            {"201": _answer("Created.", "FollowUp"), "400": BAD_REQUEST},
            "FollowUpCreate",
        ),
    },
    "/api/follow-ups/{id}": {
        "parameters": [ID_PARAMETER],
        "get": _operation(
            "Read one follow-up", {"200": _answer("The follow-up.", "FollowUp"), "404": NOT_FOUND}
        ),
        "patch": _operation(
            "Change the title, the due time, or mark it done",
            {"200": _answer("Changed.", "FollowUp"), "400": BAD_REQUEST, "404": NOT_FOUND},
            "FollowUpPatch",
        ),
        "delete": _operation(
            "Delete a follow-up", {"204": {"description": "Deleted."}, "404": NOT_FOUND}
        ),
    },
    "/api/calendars": {
        "get": _operation(
            "List the owner's calendars and what each needs",
            {"200": _answer("The calendars.", "CalendarList")},
        )
    },
    "/api/calendars/caldav": {
        "post": _operation(
            "Connect a CalDAV account (iCloud, Fastmail, Nextcloud, any server)",
            {
                "202": _answer("Recorded; discovery follows.", "Calendar"),
                "400": _answer(
                    "A missing field, an unknown preset, a server address that cannot "
                    "be used (private, local or not http(s)), or too many calendars.",
                ),
            },
            "CalDavConnect",
            description="Recorded at once; the server is asked nothing in this "
            "request. Within a minute its calendars are discovered: the account then "
            "reads choose_calendars with its choices (or needs_password when the server "
            "refused the password). The password is stored encrypted, never returned.",
        )
    },
    "/api/calendars/{id}/caldav/choose": {
        "parameters": [ID_PARAMETER],
        "post": _operation(
            "Use the chosen calendars of a discovered account",
            {
                "200": _answer("One calendar per choice, each checking.", "CalendarList"),
                "400": _answer("No choice among the account's calendars."),
                "404": _answer("No calendar of this id is waiting for a choice."),
            },
            "CalDavChoose",
        ),
    },
    "/api/calendars/{id}/caldav/password": {
        "parameters": [ID_PARAMETER],
        "post": _operation(
            "Give a new app-specific password (after needs_password)",
            {
                "200": _answer("Stored; the calendar is read again.", "Calendar"),
                "400": _answer("No password."),
                "404": _answer("No CalDAV calendar of this id."),
            },
            "CalDavPassword",
        ),
    },
}
SCHEMAS = {
    "FollowUp": _object(
        {
            "id": {"type": "integer"},
            "title": TITLE,
            "due_at": INSTANT,
            "done": {"type": "boolean"},
            "created_at": INSTANT,
            **SCHEDULE,
            "next_due_at": {
                "type": ["string", "null"],
                "format": "date-time",
                "description": "due_at, or a repeating follow-up's next occurrence.",
            },
        }
    ),
    "FollowUpList": _list_of("follow_ups", "FollowUp"),
    "Calendar": _object(
        {
            "id": {"type": "integer"},
            "provider": {"type": "string", "enum": list(Provider.values)},
            "account": STRING,
            "name": STRING,
            "state": {"type": "string", "enum": STATES},
            "nudges_on": {"type": "boolean"},
            "skip_all_day": {"type": "boolean"},
            "last_synced_at": {**INSTANT, "type": ["string", "null"]},
            "choices": {"type": "array", "items": _object({"url": STRING, "name": STRING})},
        },
        ["id", "provider", "account", "state", "nudges_on", "skip_all_day"],
    ),
    "CalendarList": _list_of("calendars", "Calendar"),
    "Error": _object({"error": STRING}),
    **BODIES,
}


def schema(server_url: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "nudge follow-ups and calendars API",
            "version": "1",
            "description": "Follow-ups of the token's owner, once or repeating. Each "
            "occurrence is nudged at each of its reminder_minutes (else the owner's default "
            "lead) before it is due, over their linked channel. Their calendars, and "
            "connecting a CalDAV account.",
        },
        "servers": [{"url": server_url.rstrip("/")}],
        "security": [{"bearerToken": []}],
        "paths": PATHS,
        "components": {
            "securitySchemes": {
                "bearerToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token made on the settings page: nudge_<user id>_<secret>.",
                }
            },
            "schemas": SCHEMAS,
        },
    }
