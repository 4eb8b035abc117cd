"""A fake of the Microsoft identity platform token endpoint and Graph ``calendarView``.

Refresh tokens rotate as Microsoft's do: each refresh returns a new one and
the used one stops working (``invalid_grant`` if presented again). Bearer
tokens are checked (401 otherwise). ``calendarView`` filters by
``startDateTime``/``endDateTime``, pages with ``$top`` and an absolute
``@odata.nextLink``, and answers in UTC only when asked with
``Prefer: outlook.timezone="UTC"`` (otherwise in Pacific Standard Time, as a
mailbox in that zone would). ``next_answers`` scripts the next calendarView
answers (429 with Retry-After, 503, garbage).

Push: ``POST /subscriptions`` validates both URLs first, as Graph does (a
POST with ``?validationToken=…`` that must answer 200, ``text/plain``, the
token echoed, within 10 s), refuses an expiry beyond 4,230 minutes, and
answers the subscription; ``GET`` reads it back (404 once removed or
expired), ``PATCH`` renews, ``DELETE`` removes (recorded in ``deleted``).
:meth:`FakeGraph.change` edits the events and POSTs a change notification
(``{value: [{subscriptionId, clientState, changeType, resource,
resourceData, ...}]}``) to every live subscription;
:meth:`FakeGraph.lifecycle` sends ``reauthorizationRequired``,
``subscriptionRemoved`` (the subscription is dropped) or ``missed``, built
by :meth:`FakeGraph.lifecycle_body` (which a test may send as it likes).
Subscriptions expire by :attr:`FakeGraph.push`'s clock.

    with FakeGraph() as graph:
        settings.MICROSOFT_GRAPH_BASE_URL = graph.graph_base_url
        settings.MICROSOFT_LOGIN_BASE_URL = graph.login_base_url
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

import requests

from tests.fakes.base import Answer, FakeProviderServer, RecordedRequest, pkce_verifier_matches
from tests.fakes.push import Posted, PushPoster

CLIENT_ID = "00000000-0000-0000-0000-00000000c1d0"
CLIENT_SECRET = "graph-test-client-secret"
TENANT = "common"
ACCOUNT = "someone@contoso.example"
TOKEN_PATH = f"/{TENANT}/oauth2/v2.0/token"
VIEW = re.compile(r"^/v1\.0/me(/calendars/(?P<calendar>[^/]+))?/calendarView(?P<delta>/delta)?$")
PACIFIC = ZoneInfo("America/Los_Angeles")
SUBSCRIPTIONS = "/v1.0/subscriptions"
SUBSCRIPTION = re.compile(r"^/v1\.0/subscriptions/(?P<id>[^/]+)$")
MAX_MINUTES = 4230
TENANT_ID = "00000000-0000-0000-0000-0000000000aa"
USER_OBJECT_ID = "00000000-0000-0000-0000-0000000000bb"


@dataclass
class Subscription:
    id: str
    resource: str
    change_type: str
    notification_url: str
    lifecycle_url: str
    client_state: str
    expiration: datetime


def _graph_error(status: int, code: str, message: str = "") -> Answer:
    return Answer.json(status, {"error": {"code": code, "message": message}})


def graph_time(moment: datetime, zone=UTC, zone_name: str = "UTC") -> dict[str, str]:
    local = moment.astimezone(zone).replace(tzinfo=None)
    return {"dateTime": local.strftime("%Y-%m-%dT%H:%M:%S.0000000"), "timeZone": zone_name}


def graph_event(
    event_id: str,
    start: datetime,
    end: datetime,
    *,
    subject: str = "Meeting",
    reminder: int | None = 15,
    **extra: Any,
) -> dict[str, Any]:
    """A Graph event; ``start``/``end`` are aware datetimes, rendered per request."""
    return {
        "id": event_id,
        "subject": subject,
        "_start": start,
        "_end": end,
        "isAllDay": False,
        "isCancelled": False,
        "isReminderOn": reminder is not None,
        "reminderMinutesBeforeStart": reminder if reminder is not None else 15,
        "responseStatus": {"response": "organizer", "time": "0001-01-01T00:00:00Z"},
        "type": "singleInstance",
        "seriesMasterId": None,
        "showAs": "busy",
        **extra,
    }


class FakeGraph(FakeProviderServer):
    def __init__(self) -> None:
        self.push = PushPoster()
        super().__init__()
        self.reset_state()

    def stop(self) -> None:
        self.push.join()
        super().stop()

    def reset_state(self) -> None:
        self.events: list[dict[str, Any]] = []
        # Other calendars by id (``/me/calendars/{id}/...``); any other id reads ``events``.
        self.calendars: dict[str, list[dict[str, Any]]] = {}
        # For calendarView/delta: a version per change, and what each change removed.
        self.version = 0
        self.removed: dict[str, list[tuple[str, int]]] = {}
        self.expires_in = 3600
        self.access_tokens: set[str] = set()
        self.refresh_tokens: set[str] = set()
        self.codes: set[str] = set()
        self.challenges: dict[str, str] = {}  # code -> PKCE challenge given at consent
        self.next_answers: list[Answer] = []
        self.page_size_cap = 1000
        self._ids = itertools.count(1)
        self.subscriptions: dict[str, Subscription] = {}
        self.deleted: list[str] = []
        self.next_subscription_answers: list[Answer] = []
        # Run once a subscription exists, before it is answered (notifications racing it).
        self.before_subscription_answer: Callable[[], Any] | None = None
        if hasattr(self, "push"):
            self.push.reset()

    # --- push helpers for tests ---------------------------------------------------
    def live_subscriptions(self) -> list[Subscription]:
        now = self.push.now()
        with self.lock:
            return [s for s in self.subscriptions.values() if s.expiration > now]

    def subscription_calls(self, method: str | None = None) -> list[RecordedRequest]:
        with self.lock:
            return [
                r
                for r in self.requests
                if r.path.startswith(SUBSCRIPTIONS) and method in (None, r.method)
            ]

    def calendar(self, calendar_id: str | None) -> list[dict[str, Any]]:
        """A calendar's event list (the default one for ``None``/primary/unknown ids)."""
        return self.calendars.get(calendar_id or "", self.events)

    def change(
        self,
        mutate: Callable[[list[dict[str, Any]]], None],
        change_type: str = "updated",
        calendar: str | None = None,
    ) -> list[Posted]:
        """Edit a calendar's events (in place) and notify each live subscription on it."""
        with self.lock:
            events = self.calendar(calendar)
            before = {e["id"]: repr(sorted(e.items())) for e in events}
            mutate(events)
            self.version += 1
            after = {e["id"]: e for e in events}
            changed = [i for i, e in after.items() if before.get(i) != repr(sorted(e.items()))]
            for event_id in changed:
                after[event_id]["_v"] = self.version
            gone = sorted(set(before) - set(after))
            self.removed.setdefault(calendar or "", []).extend((i, self.version) for i in gone)
        first = (changed + gone + ["deleted"])[0]
        resource = "me/events" if calendar in (None, "", "primary") else None
        return [
            self._notify(sub, change_type, first)
            for sub in self.live_subscriptions()
            if sub.resource == (resource or f"me/calendars/{calendar}/events")
        ]

    def notification(self, sub: Subscription, change_type: str, event_id: str) -> dict[str, Any]:
        resource = f"Users/{USER_OBJECT_ID}/Events/{event_id}"
        return {
            "value": [
                {
                    "subscriptionId": sub.id,
                    "subscriptionExpirationDateTime": sub.expiration.isoformat(),
                    "changeType": change_type,
                    "resource": resource,
                    "resourceData": {
                        "@odata.type": "#Microsoft.Graph.Event",
                        "@odata.id": resource,
                        "@odata.etag": f'W/"{secrets.token_hex(8)}"',
                        "id": event_id,
                    },
                    "clientState": sub.client_state,
                    "tenantId": TENANT_ID,
                }
            ]
        }

    def _notify(self, sub: Subscription, change_type: str, event_id: str) -> Posted:
        return self.push.post(
            sub.notification_url,
            headers={},
            json_body=self.notification(sub, change_type, event_id),
        )

    def lifecycle(self, subscription_id: str, event: str) -> Posted:
        """A lifecycle notification; ``subscriptionRemoved`` drops the subscription first."""
        with self.lock:
            sub = self.subscriptions[subscription_id]
            if event == "subscriptionRemoved":
                del self.subscriptions[subscription_id]
        return self.push.post(
            sub.lifecycle_url, headers={}, json_body=self.lifecycle_body(sub, event)
        )

    def lifecycle_body(self, sub: Subscription, event: str) -> dict[str, Any]:
        """What Graph posts to the lifecycle URL about ``sub`` as it is now."""
        return {
            "value": [
                {
                    "subscriptionId": sub.id,
                    "subscriptionExpirationDateTime": sub.expiration.isoformat(),
                    "tenantId": TENANT_ID,
                    "clientState": sub.client_state,
                    "lifecycleEvent": event,
                }
            ]
        }

    @property
    def graph_base_url(self) -> str:
        return f"{self.url}/v1.0"

    @property
    def login_base_url(self) -> str:
        return self.url

    def issue_tokens(self) -> tuple[str, str]:
        access, refresh = self._mint("access"), self._mint("refresh")
        with self.lock:
            self.access_tokens.add(access)
            self.refresh_tokens.add(refresh)
        return access, refresh

    def issue_code(self, code_challenge: str = "") -> str:
        """With the consent page's PKCE challenge, only the matching verifier redeems it."""
        code = self._mint("code")
        with self.lock:
            self.codes.add(code)
            self.challenges[code] = code_challenge
        return code

    def revoke_all(self) -> None:
        with self.lock:
            self.access_tokens.clear()
            self.refresh_tokens.clear()

    def view_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path.endswith("/calendarView")]

    def token_calls(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.path == TOKEN_PATH]

    def _mint(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}-{secrets.token_hex(8)}"

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if method == "POST":
            params.update({k: v[-1] for k, v in parse_qs(body.decode()).items()})
        self.record(RecordedRequest(method, parts.path, headers, params, body, time.time()))
        if method == "POST" and parts.path == TOKEN_PATH:
            return self._token(params)
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        with self.lock:
            authorised = token in self.access_tokens
        if not authorised:
            return Answer.json(401, {"error": {"code": "InvalidAuthenticationToken"}})
        if parts.path == "/v1.0/me":
            return Answer.json(200, {"mail": ACCOUNT, "userPrincipalName": ACCOUNT})
        if match := VIEW.match(parts.path):
            if match["delta"]:
                return self._delta(match["calendar"], params, headers)
            return self._view(params, headers, match["calendar"])
        if method == "POST" and parts.path == SUBSCRIPTIONS:
            return self._subscribe(body)
        if method in ("GET", "PATCH", "DELETE") and (match := SUBSCRIPTION.match(parts.path)):
            return self._subscription(method, match["id"], body)
        return Answer.json(404, {"error": {"code": "ResourceNotFound"}})

    def _token(self, params: dict[str, str]) -> Answer:
        if params.get("client_id") != CLIENT_ID or params.get("client_secret") != CLIENT_SECRET:
            return Answer.json(401, {"error": "invalid_client"})
        if "offline_access" not in params.get("scope", ""):
            return Answer.json(400, {"error": "invalid_scope"})
        grant = params.get("grant_type")
        with self.lock:
            if grant == "authorization_code":
                if params.get("code") not in self.codes:
                    return Answer.json(400, {"error": "invalid_grant"})
                self.codes.discard(params["code"])
                challenge = self.challenges.pop(params["code"], "")
                if not pkce_verifier_matches(challenge, params.get("code_verifier")):
                    return Answer.json(400, {"error": "invalid_grant"})
            elif grant == "refresh_token":
                if params.get("refresh_token") not in self.refresh_tokens:
                    return Answer.json(
                        400,
                        {
                            "error": "invalid_grant",
                            "error_description": "AADSTS70000: The refresh token was revoked.",
                        },
                    )
                # Rotation: the used refresh token is spent.
                self.refresh_tokens.discard(params["refresh_token"])
            else:
                return Answer.json(400, {"error": "unsupported_grant_type"})
        access, refresh = self.issue_tokens()
        return Answer.json(
            200,
            {
                "token_type": "Bearer",
                "scope": params.get("scope", ""),
                "expires_in": self.expires_in,
                "access_token": access,
                "refresh_token": refresh,
            },
        )

    def _expiry(self, value: Any) -> datetime | Answer:
        try:
            expiry = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return _graph_error(400, "InvalidRequest", "expirationDateTime is invalid")
        now = self.push.now()
        if expiry <= now or expiry > now + timedelta(minutes=MAX_MINUTES):
            return _graph_error(
                400, "InvalidRequest", "Subscription expiration can only be 4230 minutes from now"
            )
        return expiry

    def _validate(self, url: str) -> bool:
        """Graph's handshake: the endpoint must echo the token, as text/plain, within 10 s."""
        token = f"Validation: Testing client application reachability {secrets.token_hex(8)}"
        try:
            response = requests.post(
                url,
                params={"validationToken": token},
                headers={"Content-Type": "text/plain"},
                timeout=10,
            )
        except requests.RequestException:
            return False
        return (
            response.status_code == 200
            and response.headers.get("Content-Type", "").startswith("text/plain")
            and response.text == token
        )

    def _subscribe(self, body: bytes) -> Answer:
        with self.lock:
            scripted = (
                self.next_subscription_answers.pop(0) if self.next_subscription_answers else None
            )
        if scripted:
            return scripted
        try:
            request = json.loads(body)
            resource, url = request["resource"], request["notificationUrl"]
            change_type = request["changeType"]
        except (ValueError, KeyError, TypeError):
            return _graph_error(400, "InvalidRequest")
        expiry = self._expiry(request.get("expirationDateTime"))
        if isinstance(expiry, Answer):
            return expiry
        if len(str(request.get("clientState", ""))) > 128:
            return _graph_error(400, "InvalidRequest", "clientState is longer than 128")
        if not re.match(r"^me(/calendars/[^/]+)?/events$", resource):
            return _graph_error(400, "InvalidRequest", "unsupported resource")
        lifecycle = request.get("lifecycleNotificationUrl") or ""
        for address in filter(None, (url, lifecycle)):
            if not self._validate(address):
                return _graph_error(
                    400, "ValidationError", "Subscription validation request failed."
                )
        sub = Subscription(
            id=f"{secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(6)}",
            resource=resource,
            change_type=change_type,
            notification_url=url,
            lifecycle_url=lifecycle,
            client_state=str(request.get("clientState", "")),
            expiration=expiry,
        )
        with self.lock:
            self.subscriptions[sub.id] = sub
        if self.before_subscription_answer is not None:  # a change landing in that instant
            self.before_subscription_answer()
        return Answer.json(201, self._subscription_json(sub))

    def _subscription_json(self, sub: Subscription) -> dict[str, Any]:
        return {
            "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#subscriptions/$entity",
            "id": sub.id,
            "resource": sub.resource,
            "changeType": sub.change_type,
            "clientState": None,  # Graph does not echo it back
            "notificationUrl": sub.notification_url,
            "lifecycleNotificationUrl": sub.lifecycle_url,
            "expirationDateTime": sub.expiration.isoformat().replace("+00:00", "Z"),
        }

    def _subscription(self, method: str, subscription_id: str, body: bytes) -> Answer:
        now = self.push.now()
        with self.lock:
            sub = self.subscriptions.get(subscription_id)
            if sub is not None and sub.expiration <= now:
                del self.subscriptions[subscription_id]  # Graph forgets an expired one
                sub = None
        if sub is None:
            return _graph_error(404, "ResourceNotFound", "The object was not found.")
        if method == "GET":
            return Answer.json(200, self._subscription_json(sub))
        if method == "DELETE":
            with self.lock:
                del self.subscriptions[subscription_id]
                self.deleted.append(subscription_id)
            return Answer(204, b"")
        try:
            expiry = self._expiry(json.loads(body).get("expirationDateTime"))
        except (ValueError, AttributeError):
            return _graph_error(400, "InvalidRequest")
        if isinstance(expiry, Answer):
            return expiry
        with self.lock:
            sub.expiration = expiry
        return Answer.json(200, self._subscription_json(sub))

    def _delta(
        self, calendar: str | None, params: dict[str, str], headers: dict[str, str]
    ) -> Answer:
        """``calendarView/delta``: the range's events and a deltaLink; with its
        ``$deltatoken``, only what changed since (removals as ``@removed``)."""
        utc = 'outlook.timezone="UTC"' in headers.get("Prefer", "")
        try:
            low = datetime.fromisoformat(params["startDateTime"])
            high = datetime.fromisoformat(params["endDateTime"])
            since = int(params.get("$deltatoken", -1))
        except (KeyError, ValueError):
            return Answer.json(400, {"error": {"code": "ErrorInvalidParameter"}})
        with self.lock:
            events = [
                e
                for e in self.calendar(calendar)
                if e["_end"] > low and e["_start"] < high and e.get("_v", 0) > since
            ]
            removed = [i for i, v in self.removed.get(calendar or "", []) if v > since]
            version = self.version
        value = [self._render(e, utc) for e in sorted(events, key=lambda e: e["_start"])]
        if since >= 0:
            value += [{"id": i, "@removed": {"reason": "deleted"}} for i in removed]
        query = urlencode({**params, "$deltatoken": str(version)})
        path = f"/me/calendars/{calendar}" if calendar else "/me"
        return Answer.json(
            200,
            {
                "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(event)",
                "value": value,
                "@odata.deltaLink": f"{self.url}/v1.0{path}/calendarView/delta?{query}",
            },
        )

    def _render(self, event: dict[str, Any], utc: bool, select: str = "") -> dict[str, Any]:
        """The event as Graph answers: only the ``$select``ed properties (and ``id``) when
        the request names some, as Graph does, so a field we forget to ask for is missing."""
        zone, name = (UTC, "UTC") if utc else (PACIFIC, "Pacific Standard Time")
        wanted = {"id", *select.split(",")} if select else None
        rendered = {
            k: v
            for k, v in event.items()
            if not k.startswith("_") and (wanted is None or k in wanted)
        }
        rendered["start"] = graph_time(event["_start"], zone, name)
        rendered["end"] = graph_time(event["_end"], zone, name)
        return rendered

    def _view(
        self, params: dict[str, str], headers: dict[str, str], calendar: str | None = None
    ) -> Answer:
        with self.lock:
            scripted = self.next_answers.pop(0) if self.next_answers else None
            events = list(self.calendar(calendar))
        if scripted:
            return scripted
        if "startDateTime" not in params or "endDateTime" not in params:
            return Answer.json(400, {"error": {"code": "ErrorInvalidParameter"}})
        low = datetime.fromisoformat(params["startDateTime"])
        high = datetime.fromisoformat(params["endDateTime"])
        events = [e for e in events if e["_end"] > low and e["_start"] < high]
        events.sort(key=lambda e: e["_start"])
        utc = headers.get("Prefer", "").find('outlook.timezone="UTC"') >= 0
        top = min(int(params.get("$top", 10)), self.page_size_cap)
        skip = int(params.get("$skip", 0))
        payload: dict[str, Any] = {
            "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users('me')/calendarView",
            "value": [
                self._render(e, utc, params.get("$select", "")) for e in events[skip : skip + top]
            ],
        }
        if skip + top < len(events):
            query = {**params, "$skip": str(skip + top)}
            payload["@odata.nextLink"] = f"{self.url}/v1.0/me/calendarView?{urlencode(query)}"
        return Answer.json(200, payload)
