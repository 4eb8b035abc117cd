"""A fake of Google's OAuth token endpoint and Calendar API v3 ``events.list``.

Enough of the real contract for the real client code in calendars/: bearer
tokens checked on every call (401 otherwise), refresh tokens that can be
revoked (``invalid_grant``), ``singleEvents=true`` required, ``syncToken``
refused together with ``timeMin``/``timeMax`` (as Google does), time filtering
(an event is listed when it ends after ``timeMin`` and starts before
``timeMax``), ``maxResults``/``pageToken`` paging, ``defaultReminders`` and
``timeZone`` on the response. ``next_answers`` scripts the next events.list
answers (429, 500, garbage).

Push: ``events.watch`` makes a channel (``{id, resourceId, resourceUri,
token, expiration}``, the life capped at :data:`MAX_TTL_SECONDS`) and sends its
``sync`` message; :meth:`FakeGoogle.notify` POSTs ``exists`` to every live
channel on a calendar with Google's headers (``X-Goog-Channel-ID``,
``-Token``, ``-Expiration``, ``X-Goog-Resource-ID``/``-URI``/``-State``,
``X-Goog-Message-Number``, increasing but not consecutive) and no body;
:meth:`FakeGoogle.change` edits a calendar and notifies, as a user's edit
does. Channels expire by :attr:`FakeGoogle.push`'s clock; ``channels.stop``
ends one and is recorded (``stopped``). ``next_watch_answers`` scripts
``events.watch`` failures.

    with FakeGoogle() as google:
        settings.GOOGLE_API_BASE_URL = google.api_base_url
        settings.GOOGLE_TOKEN_URL = google.token_url
"""

from __future__ import annotations

import itertools
import json
import random
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.base import Answer, FakeProviderServer, RecordedRequest, pkce_verifier_matches
from tests.fakes.push import Posted, PushPoster

CLIENT_ID = "google-test-client-id.apps.example"
CLIENT_SECRET = "google-test-client-secret"
ACCOUNT = "someone@example.com"
EVENTS = re.compile(r"^/calendar/v3/calendars/(?P<calendar>[^/]+)/events$")
CALENDAR = re.compile(r"^/calendar/v3/calendars/(?P<calendar>[^/]+)$")
WATCH = re.compile(r"^/calendar/v3/calendars/(?P<calendar>[^/]+)/events/watch$")
STOP = "/calendar/v3/channels/stop"
MAX_TTL_SECONDS = 7 * 24 * 3600
CHANNEL_ID = re.compile(r"^[A-Za-z0-9\-_+/=]{1,64}$")


@dataclass
class Channel:
    id: str
    resource_id: str
    calendar: str
    address: str
    token: str
    expiration: datetime
    message_number: int = 1
    stopped: bool = False


def _instant(when: Any) -> datetime | None:
    """An event's start or end as UTC; None for a deliberately broken one (always listed)."""
    try:
        if "dateTime" in when:
            return datetime.fromisoformat(when["dateTime"]).astimezone(UTC)
        return datetime.combine(date.fromisoformat(when["date"]), dtime(), tzinfo=UTC)
    except (KeyError, TypeError, ValueError):
        return None


def _error(status: int, message: str, reason: str) -> Answer:
    return Answer.json(
        status,
        {"error": {"code": status, "message": message, "errors": [{"reason": reason}]}},
    )


class FakeGoogle(FakeProviderServer):
    def reset_state(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {"primary": []}
        self.default_reminders: list[dict[str, Any]] = [{"method": "popup", "minutes": 10}]
        self.time_zone = "Europe/Berlin"
        self.expires_in = 3600
        self.access_tokens: set[str] = set()
        self.refresh_tokens: set[str] = set()
        self.codes: dict[str, str] = {}
        self.challenges: dict[str, str] = {}  # code -> PKCE challenge given at consent
        self.next_answers: list[Answer] = []
        self.next_token_answers: list[Answer] = []
        self.next_watch_answers: list[Answer] = []
        # Run once a channel exists, before its watch is answered (notifications racing it).
        self.before_watch_answer: Callable[[], Any] | None = None
        self.channels: dict[str, Channel] = {}
        # For syncToken: a version per change, and the ids each change deleted.
        self.version = 0
        self.deleted: dict[str, list[tuple[str, int]]] = {}
        self.stopped: list[str] = []
        self._counter = itertools.count(1)
        self._numbers = random.Random(7)
        if hasattr(self, "push"):
            self.push.reset()

    def __init__(self) -> None:
        self.push = PushPoster()
        super().__init__()
        self.reset_state()

    def stop(self) -> None:
        self.push.join()
        super().stop()

    # --- push helpers for tests ---------------------------------------------------
    def live_channels(self, calendar: str | None = None) -> list[Channel]:
        now = self.push.now()
        with self.lock:
            return [
                c
                for c in self.channels.values()
                if not c.stopped and c.expiration > now and calendar in (None, c.calendar)
            ]

    def watch_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path.endswith("/events/watch")]

    def stop_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path == STOP]

    def notify(self, calendar: str = "primary", state: str = "exists") -> list[Posted]:
        """What Google does after a change: one POST per live channel on the calendar."""
        return [self._post(channel, state) for channel in self.live_channels(calendar)]

    def change(
        self, mutate: Callable[[list[dict[str, Any]]], None], calendar: str = "primary"
    ) -> list[Posted]:
        """Edit the calendar's events (in place) and notify its channels."""
        with self.lock:
            events = self.events.setdefault(calendar, [])
            before = {e["id"]: repr(sorted(e.items())) for e in events}
            mutate(events)
            self.version += 1
            for event in events:
                if before.get(event["id"]) != repr(sorted(event.items())):
                    event["_v"] = self.version
            gone = set(before) - {e["id"] for e in events}
            self.deleted.setdefault(calendar, []).extend((i, self.version) for i in gone)
        return self.notify(calendar)

    def headers_for(self, channel: Channel, state: str) -> dict[str, str]:
        """Google's headers for the channel's next message (its number advanced)."""
        with self.lock:
            if state != "sync":
                channel.message_number += self._numbers.randint(1, 5)
            number = channel.message_number
        return {
            "X-Goog-Channel-ID": channel.id,
            "X-Goog-Channel-Token": channel.token,
            "X-Goog-Channel-Expiration": channel.expiration.strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "X-Goog-Resource-ID": channel.resource_id,
            "X-Goog-Resource-URI": f"{self.api_base_url}/calendars/{channel.calendar}/events",
            "X-Goog-Resource-State": state,
            "X-Goog-Message-Number": str(number),
            "Content-Length": "0",
        }

    def _post(self, channel: Channel, state: str) -> Posted:
        return self.push.post(channel.address, headers=self.headers_for(channel, state))

    # --- helpers for tests ----------------------------------------------------
    @property
    def api_base_url(self) -> str:
        return f"{self.url}/calendar/v3"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    @property
    def auth_url(self) -> str:
        return f"{self.url}/o/oauth2/v2/auth"

    def issue_tokens(self) -> tuple[str, str]:
        """A valid (access token, refresh token) pair, as if consent had been given."""
        access, refresh = self._new_access_token(), f"1//refresh-{secrets.token_hex(8)}"
        with self.lock:
            self.refresh_tokens.add(refresh)
        return access, refresh

    def issue_code(self, code_challenge: str = "") -> str:
        """An authorisation code the callback can exchange; with the consent page's PKCE
        challenge, only together with the matching verifier."""
        code = f"4/code-{secrets.token_hex(6)}"
        with self.lock:
            self.codes[code] = f"1//refresh-{secrets.token_hex(8)}"
            self.challenges[code] = code_challenge
        return code

    def revoke_all(self) -> None:
        """The user removed our access in their Google account."""
        with self.lock:
            self.access_tokens.clear()
            self.refresh_tokens.clear()

    def expire_access_tokens(self) -> None:
        with self.lock:
            self.access_tokens.clear()

    def events_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path.endswith("/events")]

    def token_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path == "/token"]

    @property
    def revoke_url(self) -> str:
        return f"{self.url}/revoke"

    # --- the server -------------------------------------------------------------
    def _revoke(self, token: str) -> Answer:
        """RFC 7009 as Google answers it: 200 when revoked, 400 invalid_token otherwise."""
        with self.lock:
            known = token in self.refresh_tokens
            if known:
                self.refresh_tokens.discard(token)
                self.access_tokens.clear()
        if not known:
            return Answer.json(400, {"error": "invalid_token", "error_description": "Bad Request"})
        return Answer.json(200, {})

    def _new_access_token(self) -> str:
        token = f"ya29.access-{secrets.token_hex(8)}"
        with self.lock:
            self.access_tokens.add(token)
        return token

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if method == "POST":
            params.update({k: v[-1] for k, v in parse_qs(body.decode()).items()})
        self.record(RecordedRequest(method, parts.path, headers, params, body, time.time()))
        if method == "POST" and parts.path == "/token":
            return self._token(params)
        if method == "POST" and parts.path == "/revoke":
            return self._revoke(params.get("token", ""))
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        with self.lock:
            authorised = token in self.access_tokens
        if not authorised:
            return _error(401, "Invalid Credentials", "authError")
        if match := EVENTS.match(parts.path):
            return self._events(unquote(match["calendar"]), params)
        if method == "POST" and (match := WATCH.match(parts.path)):
            return self._watch(unquote(match["calendar"]), body)
        if method == "POST" and parts.path == STOP:
            return self._stop(body)
        if CALENDAR.match(parts.path):
            return Answer.json(200, {"id": ACCOUNT, "summary": ACCOUNT})
        return _error(404, "Not Found", "notFound")

    def _token(self, params: dict[str, str]) -> Answer:
        with self.lock:
            scripted = self.next_token_answers.pop(0) if self.next_token_answers else None
        if scripted:
            return scripted
        if params.get("client_id") != CLIENT_ID or params.get("client_secret") != CLIENT_SECRET:
            return Answer.json(401, {"error": "invalid_client"})
        grant = params.get("grant_type")
        with self.lock:
            if grant == "authorization_code":
                code = params.get("code", "")
                refresh = self.codes.pop(code, None)
                challenge = self.challenges.pop(code, "")
                if refresh is None or not pkce_verifier_matches(
                    challenge, params.get("code_verifier")
                ):
                    return Answer.json(400, {"error": "invalid_grant"})
                self.refresh_tokens.add(refresh)
            elif grant == "refresh_token":
                refresh = None
                if params.get("refresh_token") not in self.refresh_tokens:
                    return Answer.json(
                        400,
                        {"error": "invalid_grant", "error_description": "Token has been revoked."},
                    )
            else:
                return Answer.json(400, {"error": "unsupported_grant_type"})
        payload: dict[str, Any] = {
            "access_token": self._new_access_token(),
            "expires_in": self.expires_in,
            "token_type": "Bearer",
            "scope": "https://www.googleapis.com/auth/calendar.readonly",
        }
        if refresh:
            payload["refresh_token"] = refresh
        return Answer.json(200, payload)

    def _watch(self, calendar: str, body: bytes) -> Answer:
        with self.lock:
            scripted = self.next_watch_answers.pop(0) if self.next_watch_answers else None
        if scripted:
            return scripted
        try:
            request = json.loads(body)
            channel_id, address = request["id"], request["address"]
            ttl = int((request.get("params") or {}).get("ttl", MAX_TTL_SECONDS))
        except (ValueError, KeyError, TypeError):
            return _error(400, "Invalid request", "badRequest")
        if request.get("type") not in ("web_hook", "webhook"):
            return _error(400, "Invalid channel type", "invalid")
        if not CHANNEL_ID.match(str(channel_id)) or len(str(request.get("token", ""))) > 256:
            return _error(400, "Invalid channel id or token", "invalid")
        if not urlsplit(address).scheme.startswith("http"):
            return _error(400, "WebHook callback must be HTTPS", "push.webhookUrlNotHttps")
        with self.lock:
            if calendar not in self.events:
                return _error(404, "Not Found", "notFound")
            if channel_id in self.channels:
                return _error(400, f"Channel id {channel_id} not unique", "channelIdNotUnique")
            channel = Channel(
                id=channel_id,
                resource_id=f"res-{calendar}-{secrets.token_hex(4)}",
                calendar=calendar,
                address=address,
                token=str(request.get("token", "")),
                expiration=self.push.now() + timedelta(seconds=min(ttl, MAX_TTL_SECONDS)),
            )
            self.channels[channel_id] = channel
        self.push.post_later(channel.address, headers=self.headers_for(channel, "sync"))
        if self.before_watch_answer is not None:  # e.g. a change landing in that instant
            self.before_watch_answer()
        return Answer.json(
            200,
            {
                "kind": "api#channel",
                "id": channel.id,
                "resourceId": channel.resource_id,
                "resourceUri": f"{self.api_base_url}/calendars/{calendar}/events",
                "token": channel.token,
                "expiration": str(int(channel.expiration.timestamp() * 1000)),
            },
        )

    def _stop(self, body: bytes) -> Answer:
        try:
            request = json.loads(body)
        except ValueError:
            return _error(400, "Invalid request", "badRequest")
        with self.lock:
            channel = self.channels.get(str(request.get("id")))
            if channel is None or channel.resource_id != request.get("resourceId"):
                return _error(404, "Channel not found", "notFound")
            channel.stopped = True
            self.stopped.append(channel.id)
        return Answer(204, b"")

    def _events(self, calendar: str, params: dict[str, str]) -> Answer:
        with self.lock:
            scripted = self.next_answers.pop(0) if self.next_answers else None
            events = list(self.events.get(calendar, []))
        if scripted:
            return scripted
        if calendar not in self.events:
            return _error(404, "Not Found", "notFound")
        if params.get("singleEvents") != "true":
            return _error(400, "this fake only expands recurring events", "badRequest")
        if "syncToken" in params and ("timeMin" in params or "timeMax" in params):
            return _error(400, "Sync token cannot be used with other request restrictions.", "x")
        incremental = "timeMin" not in params and "timeMax" not in params
        tombstones: list[dict[str, Any]] = []
        if "syncToken" in params:
            since = int(params["syncToken"])
            events = [e for e in events if e.get("_v", 0) > since]
            with self.lock:
                tombstones = [
                    {"kind": "calendar#event", "id": i, "status": "cancelled"}
                    for i, v in self.deleted.get(calendar, [])
                    if v > since
                ]
        low_sentinel, high_sentinel = (
            datetime.min.replace(tzinfo=UTC),
            datetime.max.replace(tzinfo=UTC),
        )
        if "timeMin" in params:
            low = datetime.fromisoformat(params["timeMin"])
            events = [e for e in events if (_instant(e.get("end")) or high_sentinel) > low]
        if "timeMax" in params:
            high = datetime.fromisoformat(params["timeMax"])
            events = [e for e in events if (_instant(e.get("start")) or low_sentinel) < high]
        events.sort(key=lambda e: _instant(e.get("start")) or low_sentinel)
        page_size = int(params.get("maxResults", 250))
        offset = int(params.get("pageToken", 0))
        page = [{k: v for k, v in e.items() if not k.startswith("_")} for e in events]
        page = page[offset : offset + page_size] + (tombstones if offset == 0 else [])
        payload: dict[str, Any] = {
            "kind": "calendar#events",
            "summary": ACCOUNT,
            "timeZone": self.time_zone,
            "defaultReminders": self.default_reminders,
            "items": page,
        }
        if offset + page_size < len(events):
            payload["nextPageToken"] = str(offset + page_size)
        elif incremental:
            with self.lock:
                payload["nextSyncToken"] = str(self.version)
        return Answer(200, json.dumps(payload).encode(), (("Content-Type", "application/json"),))


def google_event(
    event_id: str,
    start: datetime,
    end: datetime,
    *,
    summary: str = "Meeting",
    reminders: dict[str, Any] | None = None,
    status: str = "confirmed",
    **extra: Any,
) -> dict[str, Any]:
    """An events#event as events.list returns it (dateTime with an offset)."""
    return {
        "kind": "calendar#event",
        "id": event_id,
        "status": status,
        "summary": summary,
        "start": {"dateTime": start.isoformat(), "timeZone": "UTC"},
        "end": {"dateTime": end.isoformat(), "timeZone": "UTC"},
        "reminders": reminders if reminders is not None else {"useDefault": True},
        **extra,
    }
