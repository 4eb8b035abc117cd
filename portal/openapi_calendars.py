"""The calendars part of the OpenAPI description (``portal.calendar_api``): listing the
owner's calendars, and connecting a CalDAV account in the page's three steps."""

from __future__ import annotations

from typing import Any

from calendars.caldav_connect import PRESETS


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}


def _answer(description: str, name: str) -> dict[str, Any]:
    return {"description": description, "content": _json(name)}


CONNECTION_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}
UNAUTHORIZED = _answer("Missing, unknown, expired or revoked token.", "Error")
STATES = ["active", "checking", "choose_calendars", "needs_password", "needs_reauth", "error"]


def paths() -> dict[str, Any]:
    return {
        "/api/calendars": {
            "get": {
                "summary": "List the owner's calendars and what each needs",
                "responses": {
                    "200": _answer("The calendars.", "CalendarList"),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/calendars/caldav": {
            "post": {
                "summary": "Connect a CalDAV account (iCloud, Fastmail, Nextcloud, any server)",
                "description": "Recorded at once; the server is asked nothing in this "
                "request. Within a minute its calendars are discovered: the account then "
                "reads choose_calendars with its choices (or needs_password when the server "
                "refused the password). The password is stored encrypted, never returned.",
                "requestBody": {"required": True, "content": _json("CalDavConnect")},
                "responses": {
                    "202": _answer("Recorded; discovery follows.", "Calendar"),
                    "400": _answer(
                        "A missing field, an unknown preset, a server address that cannot "
                        "be used (private, local or not http(s)), or too many calendars.",
                        "Error",
                    ),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/calendars/{id}/caldav/choose": {
            "parameters": [CONNECTION_ID],
            "post": {
                "summary": "Use the chosen calendars of a discovered account",
                "requestBody": {"required": True, "content": _json("CalDavChoose")},
                "responses": {
                    "200": _answer("One calendar per choice, each checking.", "CalendarList"),
                    "400": _answer("No choice among the account's calendars.", "Error"),
                    "401": UNAUTHORIZED,
                    "404": _answer("No calendar of this id is waiting for a choice.", "Error"),
                },
            },
        },
        "/api/calendars/{id}/caldav/password": {
            "parameters": [CONNECTION_ID],
            "post": {
                "summary": "Give a new app-specific password (after needs_password)",
                "requestBody": {"required": True, "content": _json("CalDavPassword")},
                "responses": {
                    "200": _answer("Stored; the calendar is read again.", "Calendar"),
                    "400": _answer("No password.", "Error"),
                    "401": UNAUTHORIZED,
                    "404": _answer("No CalDAV calendar of this id.", "Error"),
                },
            },
        },
    }


def schemas() -> dict[str, Any]:
    choice = {
        "type": "object",
        "required": ["url", "name"],
        "properties": {"url": {"type": "string"}, "name": {"type": "string"}},
    }
    return {
        "Calendar": {
            "type": "object",
            "required": ["id", "provider", "account", "state", "nudges_on", "skip_all_day"],
            "properties": {
                "id": {"type": "integer"},
                "provider": {
                    "type": "string",
                    "enum": ["google", "microsoft", "ics", "caldav", "local"],
                },
                "account": {"type": "string"},
                "name": {"type": "string"},
                "state": {"type": "string", "enum": STATES},
                "nudges_on": {"type": "boolean"},
                "skip_all_day": {"type": "boolean"},
                "last_synced_at": {"type": ["string", "null"], "format": "date-time"},
                "choices": {"type": "array", "items": choice},
            },
        },
        "CalendarList": {
            "type": "object",
            "properties": {
                "calendars": {"type": "array", "items": {"$ref": "#/components/schemas/Calendar"}}
            },
        },
        "CalDavConnect": {
            "type": "object",
            "required": ["preset", "username", "password"],
            "additionalProperties": False,
            "properties": {
                "preset": {"type": "string", "enum": list(PRESETS)},
                "server_url": {
                    "type": "string",
                    "description": "The server's address, for nextcloud and other.",
                },
                "username": {"type": "string"},
                "password": {
                    "type": "string",
                    "writeOnly": True,
                    "description": "An app-specific password (iCloud: Apple ID → Sign-In "
                    "and Security → App-Specific Passwords).",
                },
            },
        },
        "CalDavChoose": {
            "type": "object",
            "required": ["calendars"],
            "additionalProperties": False,
            "properties": {"calendars": {"type": "array", "items": {"type": "string"}}},
        },
        "CalDavPassword": {
            "type": "object",
            "required": ["password"],
            "additionalProperties": False,
            "properties": {"password": {"type": "string", "writeOnly": True}},
        },
    }
