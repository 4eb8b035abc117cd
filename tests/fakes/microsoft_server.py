"""A fake of the Microsoft identity platform token endpoint and Graph ``calendarView``.

Refresh tokens rotate as Microsoft's do: each refresh returns a new one and
the used one stops working (``invalid_grant`` if presented again). Bearer
tokens are checked (401 otherwise). ``calendarView`` filters by
``startDateTime``/``endDateTime``, pages with ``$top`` and an absolute
``@odata.nextLink``, and answers in UTC only when asked with
``Prefer: outlook.timezone="UTC"`` (otherwise in Pacific Standard Time, as a
mailbox in that zone would). ``next_answers`` scripts the next calendarView
answers (429 with Retry-After, 503, garbage).

    with FakeGraph() as graph:
        settings.MICROSOFT_GRAPH_BASE_URL = graph.graph_base_url
        settings.MICROSOFT_LOGIN_BASE_URL = graph.login_base_url
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

from tests.fakes.base import Answer, FakeProviderServer, RecordedRequest, pkce_verifier_matches

CLIENT_ID = "00000000-0000-0000-0000-00000000c1d0"
CLIENT_SECRET = "graph-test-client-secret"
TENANT = "common"
ACCOUNT = "someone@contoso.example"
TOKEN_PATH = f"/{TENANT}/oauth2/v2.0/token"
VIEW = re.compile(r"^/v1\.0/me(/calendars/[^/]+)?/calendarView$")
PACIFIC = ZoneInfo("America/Los_Angeles")


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
        super().__init__()
        self.reset_state()

    def reset_state(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.expires_in = 3600
        self.access_tokens: set[str] = set()
        self.refresh_tokens: set[str] = set()
        self.codes: set[str] = set()
        self.challenges: dict[str, str] = {}  # code -> PKCE challenge given at consent
        self.next_answers: list[Answer] = []
        self.page_size_cap = 1000
        self._ids = itertools.count(1)

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
        if VIEW.match(parts.path):
            return self._view(params, headers)
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

    def _render(self, event: dict[str, Any], utc: bool) -> dict[str, Any]:
        zone, name = (UTC, "UTC") if utc else (PACIFIC, "Pacific Standard Time")
        rendered = {k: v for k, v in event.items() if not k.startswith("_")}
        rendered["start"] = graph_time(event["_start"], zone, name)
        rendered["end"] = graph_time(event["_end"], zone, name)
        return rendered

    def _view(self, params: dict[str, str], headers: dict[str, str]) -> Answer:
        with self.lock:
            scripted = self.next_answers.pop(0) if self.next_answers else None
            events = list(self.events)
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
            "value": [self._render(e, utc) for e in events[skip : skip + top]],
        }
        if skip + top < len(events):
            query = {**params, "$skip": str(skip + top)}
            payload["@odata.nextLink"] = f"{self.url}/v1.0/me/calendarView?{urlencode(query)}"
        return Answer.json(200, payload)
