"""A fake of Twilio's Messages API, enough for the real ``twilio`` library.

``POST /2010-04-01/Accounts/{AccountSid}/Messages.json`` with a form body and
HTTP basic auth (account SID : auth token) answers 201 with a message
resource and a fresh ``SM…`` sid, or a scripted :class:`Fault` with Twilio's
real error body ``{"code", "message", "more_info", "status"}``.

    with FakeTwilio() as twilio:
        twilio.plan.for_recipient("whatsapp:+15550001", INVALID_TO)
        settings.TWILIO_API_BASE_URL = twilio.url

A message sent through a Content template is kept with its template
(:meth:`FakeTwilio.templates`: ``ContentSid`` and the decoded
``ContentVariables``). The other direction — a person writing back, or
tapping a template's quick-reply button — is :meth:`FakeTwilio.inbound`, the
form Twilio posts to the inbound webhook, signed with this account's auth
token the way Twilio signs it (:meth:`FakeTwilio.post_inbound`).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs

import requests
from twilio.request_validator import RequestValidator

from tests.fakes.base import Answer, Delivered, FakeProviderServer, Fault, RecordedRequest

ACCOUNT_SID = "AC" + "0123456789abcdef" * 2
AUTH_TOKEN = "twilio-auth-token-" + "5ecre7" * 4
MESSAGES_PATH = re.compile(r"^/2010-04-01/Accounts/(?P<account>AC\w+)/Messages\.json$")


def twilio_error(
    code: int,
    message: str,
    status: int = 400,
    *,
    retry_after: str | None = None,
    name: str | None = None,
) -> Fault:
    """A Twilio REST error answer, as Twilio words it."""
    headers = (("Retry-After", retry_after),) if retry_after is not None else ()
    return Fault(
        name=name or f"twilio-{code}",
        status=status,
        body={
            "code": code,
            "message": message,
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        },
        headers=headers,
    )


INVALID_TO = twilio_error(21211, "Invalid 'To' Phone Number: whatsapp:+1555XXXXXXX")
UNSUBSCRIBED = twilio_error(21610, "Attempt to send to unsubscribed recipient")
NOT_MOBILE = twilio_error(21614, "'To' number is not a valid mobile number")
OUTSIDE_WINDOW = twilio_error(
    63016,
    "Failed to send freeform message because you are outside the allowed window. "
    "If you are using WhatsApp, please use a Message Template.",
)
REGION_NOT_ENABLED = twilio_error(
    21408, "Permission to send an SMS has not been enabled for the region indicated by the 'To'"
)
CHANNEL_RATE_LIMIT = twilio_error(63018, "Rate limit exceeded for Channel", 429)
TOO_MANY_REQUESTS = twilio_error(20429, "Too Many Requests", 429, retry_after="7")
SERVER_ERROR = twilio_error(20500, "Internal Server Error", 500)
SERVICE_UNAVAILABLE = twilio_error(20503, "Service Unavailable", 503)
# A proxy's HTML page, not JSON: the library has only the status to go on.
BAD_GATEWAY = Fault("bad-gateway", 502, "<html><body>502 Bad Gateway</body></html>")


def slow(seconds: float, *, delivers: bool = False) -> Fault:
    """An answer held back ``seconds``; with ``delivers`` Twilio still sent the message."""
    return Fault(
        name="slow",
        status=201 if delivers else 504,
        body={"code": 20504, "message": "Gateway Timeout", "status": 504},
        delay=seconds,
        delivers=delivers,
    )


AUTHENTICATE = twilio_error(20003, "Authenticate", 401, name="auth")


class FakeTwilio(FakeProviderServer):
    """Twilio's Messages endpoint for one account."""

    def __init__(self, account_sid: str = ACCOUNT_SID, auth_token: str = AUTH_TOKEN) -> None:
        super().__init__()
        self.account_sid = account_sid
        self.auth_token = auth_token

    def templates(self) -> list[tuple[str, str, dict[str, str]]]:
        """Each message sent through a Content template: (to, ContentSid, its variables)."""
        with self.lock:
            return [
                (d.recipient, d.params["ContentSid"], json.loads(d.params["ContentVariables"]))
                for d in self.delivered
                if d.params.get("ContentSid")
            ]

    def inbound(
        self,
        number: str,
        body: str,
        *,
        to: str,
        button_payload: str = "",
        replied_to: str = "",
    ) -> dict[str, str]:
        """The form Twilio posts for a WhatsApp message from ``number`` to our sender ``to``.

        With ``button_payload`` it is a tapped quick reply: ``ButtonText`` is the
        button's title (``body``), ``ButtonPayload`` its id, and
        ``OriginalRepliedMessageSid`` the message the button was under.
        """
        sid = "SM" + secrets.token_hex(16)
        params = {
            "SmsMessageSid": sid,
            "NumMedia": "0",
            "ProfileName": "Ana",
            "MessageType": "button" if button_payload else "text",
            "SmsSid": sid,
            "WaId": number.lstrip("+"),
            "SmsStatus": "received",
            "Body": body,
            "To": f"whatsapp:{to}",
            "NumSegments": "1",
            "ReferralNumMedia": "0",
            "MessageSid": sid,
            "AccountSid": self.account_sid,
            "From": f"whatsapp:{number}",
            "ApiVersion": "2010-04-01",
        }
        if button_payload:
            params |= {"ButtonText": body, "ButtonPayload": button_payload}
            if replied_to:
                params["OriginalRepliedMessageSid"] = replied_to
        return params

    def signature(self, url: str, params: dict[str, str]) -> str:
        """``X-Twilio-Signature`` for a post of ``params`` to ``url``, keyed as Twilio keys it."""
        return RequestValidator(self.auth_token).compute_signature(url, params)

    def post_inbound(self, url: str, params: dict[str, str]) -> requests.Response:
        """Post a signed inbound message to a running server at ``url``, as Twilio does."""
        return requests.post(
            url,
            data=params,
            headers={"X-Twilio-Signature": self.signature(url, params)},
            timeout=10,
        )

    def _authorized(self, headers: dict[str, str]) -> bool:
        expected = base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        authorization = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        return secrets.compare_digest(authorization, f"Basic {expected}")

    def message_resource(self, sid: str, params: dict[str, Any]) -> dict[str, Any]:
        now = formatdate(usegmt=True)
        return {
            "account_sid": self.account_sid,
            "api_version": "2010-04-01",
            "body": params.get("Body", ""),
            "date_created": now,
            "date_sent": None,
            "date_updated": now,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": params.get("From"),
            "messaging_service_sid": None,
            "num_media": "0",
            "num_segments": "1",
            "price": None,
            "price_unit": "USD",
            "sid": sid,
            "status": "queued",
            "subresource_uris": {
                "media": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}/Media.json"
            },
            "to": params.get("To"),
            "uri": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}.json",
        }

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        params = {k: v[-1] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        request = RecordedRequest(method, path, headers, params, body, time.time())
        match = MESSAGES_PATH.match(path.split("?", 1)[0])
        if method != "POST" or not match:
            self.record(request)
            return Answer.json(404, {"code": 20404, "message": "Not Found", "status": 404})
        if match["account"] != self.account_sid or not self._authorized(headers):
            request.outcome = AUTHENTICATE.name
            self.record(request)
            return Answer.from_fault(AUTHENTICATE)

        recipient = params.get("To", "")
        _, fault = self.next_send(recipient)
        if fault is not None and not fault.delivers:
            request.outcome = fault.name
            self.record(request)
            return Answer.from_fault(fault)

        sid = "SM" + secrets.token_hex(16)
        text = params.get("Body") or params.get("ContentVariables", "")
        self.deliver(Delivered(recipient, text, sid, params, time.time()))
        request.outcome = "delivered"
        self.record(request)
        resource = Answer.json(201, self.message_resource(sid, params))
        if fault is not None:  # a slow answer after the message went out
            return Answer(resource.status, resource.body, resource.headers, fault.delay)
        return resource
