"""WhatsApp through Twilio. A read timeout, a drop after the request left or an unreadable
2xx is never retried: Twilio may have it (no idempotency key). With
``TWILIO_ACTIONS_CONTENT_SID`` quick replies carry signed Snooze and Done tokens.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3
from django.conf import settings
from twilio.base.exceptions import (
    TwilioException,
    TwilioRestException,
    TwilioServiceException,
)
from twilio.http.http_client import TwilioHttpClient
from twilio.http.response import Response
from twilio.rest import Client

from core.config import NudgeConfig
from core.http_retry_after import parse_retry_after
from messaging.action_tokens import DONE, SNOOZE, sign
from messaging.channels.base import (
    NudgeMessage,
    PermanentSendError,
    RateLimited,
    Sender,
    SendReceipt,
    TransientSendError,
    UnconfirmedSendError,
    misconfigured,
    unreadable_acceptance,
)

# How long Twilio may keep an unsent message queued: a nudge is worth no more.
MAX_VALIDITY_SECONDS = 14_400
MIN_VALIDITY_SECONDS = 1  # Twilio's minimum
# When a rate limit comes without Retry-After: try again on the next minute's run.
DEFAULT_RETRY_AFTER_SECONDS = 60.0

RATE_LIMIT_CODES = {
    20429: "too many requests",
    63017: "account message rate exceeded",
    63018: "WhatsApp sender rate limit exceeded for the channel",
}
DAILY_LIMIT_CODE = 63038
DAILY_LIMIT_RETRY_AFTER_SECONDS = 3600.0
PERMANENT_CODES = {
    20003: "authentication failed: check TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN",
    21211: "invalid 'To' number",
    21408: "sending to this region is not enabled on the account",
    21610: "recipient unsubscribed (replied STOP)",
    21614: "'To' is not a mobile number",
    63016: "outside the 24-hour window and no approved template (set TWILIO_CONTENT_SID)",
}
# 4xx statuses that describe the moment, not the request.
RETRYABLE_4XX = {408, 409, 423, 425}


class BaseUrlHttpClient(TwilioHttpClient):
    """Twilio's own HTTP client (one per sending thread), sent to ``base_url``'s scheme
    and host (a test server, a proxy), keeping the last response's headers:
    :class:`TwilioRestException` drops them, and ``Retry-After`` lives there."""

    def __init__(self, base_url: str = "", *, timeout: float | None = None) -> None:
        super().__init__(timeout=timeout)
        self.base_url = base_url.rstrip("/")
        self.last_response_headers: Mapping[str, str] = {}

    def rewrite(self, url: str) -> str:
        if not self.base_url:
            return url
        base = urlsplit(self.base_url)
        original = urlsplit(url)
        return urlunsplit((base.scheme, base.netloc, base.path + original.path, original.query, ""))

    def request(self, method: str, url: str, *args, **kwargs) -> Response:
        self.last_response_headers = {}
        response = super().request(method, self.rewrite(url), *args, **kwargs)
        self.last_response_headers = dict(response.headers or {})
        return response


def _detail(exc: TwilioRestException | TwilioServiceException) -> str:
    # Not str(exc): on a terminal the library decorates it with ANSI colours.
    if isinstance(exc, TwilioServiceException):
        return f"{exc.title} - {exc.detail}" if exc.detail else str(exc.title or "")
    return str(exc.msg or "").removeprefix("Unable to create record: ")


def classify_twilio_error(
    exc: TwilioRestException | TwilioServiceException, headers: Mapping[str, str] | None = None
) -> TransientSendError | PermanentSendError:
    """The channel error a Twilio API error stands for: a rate limit retries later;
    any 4xx but ``RETRYABLE_4XX`` is permanent (a wrong credential too: retrying
    cannot fix it); 5xx is transient."""
    status = int(exc.status or 0)
    code = int(exc.code) if str(exc.code or "").isdigit() else status
    detail = _detail(exc) or f"HTTP {status}"
    code_text = str(code) if code else str(status)
    lower_headers = {k.lower(): v for k, v in (headers or {}).items()}

    if status == 429 or code in RATE_LIMIT_CODES:
        retry_after = parse_retry_after(lower_headers.get("retry-after"))
        return RateLimited(
            f"Twilio rate limit: {RATE_LIMIT_CODES.get(code, detail)}",
            code=code_text,
            retry_after=retry_after if retry_after is not None else DEFAULT_RETRY_AFTER_SECONDS,
        )
    if code == DAILY_LIMIT_CODE:
        return RateLimited(
            "Twilio daily message limit reached",
            code=code_text,
            retry_after=DAILY_LIMIT_RETRY_AFTER_SECONDS,
        )
    if code in PERMANENT_CODES:
        return PermanentSendError(f"Twilio: {PERMANENT_CODES[code]} ({detail})", code=code_text)
    if status >= 500 or status in RETRYABLE_4XX or status == 0:
        return TransientSendError(f"Twilio HTTP {status}: {detail}", code=code_text)
    return PermanentSendError(f"Twilio HTTP {status}: {detail}", code=code_text)


# What sending needs; linking a number needs its confirmation template too.
SENDING_SETTINGS = ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "TWILIO_WHATSAPP_FROM")


def missing_settings(names: tuple[str, ...]) -> list[str]:
    """Those of the settings ``names`` that are empty on this server."""
    return [name for name in names if not getattr(settings, name)]


def whatsapp_address(number: str) -> str:
    """``whatsapp:+14155550100`` from an E.164 number (or an already prefixed one)."""
    number = number.strip()
    return number if number.startswith("whatsapp:") else f"whatsapp:{number}"


class WhatsAppChannel(Sender):
    def __init__(self) -> None:
        self.account_sid: str = settings.TWILIO_ACCOUNT_SID
        self.from_address: str = settings.TWILIO_WHATSAPP_FROM
        self.content_sid: str = settings.TWILIO_CONTENT_SID
        self.actions_content_sid: str = NudgeConfig.from_settings().whatsapp_actions_content_sid
        self.status_callback: str = settings.TWILIO_STATUS_CALLBACK_URL
        self._auth_token: str = settings.TWILIO_AUTH_TOKEN
        self.base_url: str = settings.TWILIO_API_BASE_URL
        self.timeout: float = settings.CHANNEL_TIMEOUT_SECONDS
        # A Twilio client (and requests Session, not promised thread-safe) per
        # sending thread, which keeps that thread's connection pool warm.
        self._local = threading.local()
        self._lock = threading.Lock()
        self._http_clients: list[BaseUrlHttpClient] = []

    def twilio(self) -> tuple[Client, BaseUrlHttpClient]:
        """This thread's Twilio client and the HTTP client that remembers its headers."""
        client = getattr(self._local, "client", None)
        if client is None:
            missing = missing_settings(SENDING_SETTINGS)
            if missing:
                raise misconfigured(f"WhatsApp is not configured: {', '.join(missing)} empty")
            http_client = BaseUrlHttpClient(self.base_url, timeout=self.timeout)
            client = Client(self.account_sid, self._auth_token, http_client=http_client)
            self._local.client, self._local.http_client = client, http_client
            with self._lock:
                self._http_clients.append(http_client)
        return client, self._local.http_client

    def message_parameters(self, address: str, message: NudgeMessage) -> dict[str, object]:
        """What goes to ``messages.create`` beside the numbers: a template when one is
        configured, else a body."""
        validity = max(MIN_VALIDITY_SECONDS, min(message.valid_for_seconds, MAX_VALIDITY_SECONDS))
        parameters: dict[str, object] = {"validity_period": validity}
        content_sid = self.content_sid
        variables = {"1": message.title, "2": message.local_time, "3": str(message.minutes_until)}
        actions = message.actions
        if self.actions_content_sid and actions is not None:
            # Quick replies: each button's id is the token a tap sends back.
            number = address.strip().removeprefix("whatsapp:")
            content_sid = self.actions_content_sid
            variables["4"] = sign(SNOOZE, actions.send_id, number)
            variables["5"] = sign(DONE, actions.send_id, number)
        if content_sid:
            # Outside the 24-hour window a business message needs an approved template.
            parameters["content_sid"] = content_sid
            parameters["content_variables"] = json.dumps(variables)
        else:
            parameters["body"] = message.text
        if self.status_callback:
            parameters["status_callback"] = self.status_callback
        return parameters

    def create(self, address: str, **parameters: object) -> Any:
        """``messages.create`` to ``address`` from our number, on this thread's client; a
        failure raised as the channel error it stands for, with the credentials redacted."""
        client, http_client = self.twilio()
        to, from_ = whatsapp_address(address), whatsapp_address(self.from_address)
        try:
            return client.messages.create(to=to, from_=from_, **parameters)
        except (TwilioRestException, TwilioServiceException) as exc:
            error = classify_twilio_error(exc, http_client.last_response_headers)
            # from None: the library's exception may quote our credentials back.
            raise error.redacted(self._auth_token, self.account_sid) from None
        except requests.ConnectTimeout as exc:
            raise TransientSendError("could not reach Twilio in time", code="timeout") from exc
        except requests.Timeout as exc:
            # The request left; Twilio may have queued it (no idempotency key).
            raise UnconfirmedSendError("Twilio did not answer in time", code="timeout") from exc
        except requests.ConnectionError as exc:
            if exc.args and isinstance(exc.args[0], urllib3.exceptions.ProtocolError):
                # Dropped after the request went out: Twilio may have queued it.
                raise UnconfirmedSendError(
                    "Twilio hung up without answering", code="network"
                ) from exc
            raise TransientSendError(
                f"cannot reach Twilio ({type(exc).__name__})", code="network"
            ) from exc
        except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema) as exc:
            raise misconfigured(
                f"TWILIO_API_BASE_URL is not a usable URL ({type(exc).__name__})"
            ) from exc
        except (requests.RequestException, TwilioException) as exc:
            raise TransientSendError(
                f"unexpected failure talking to Twilio ({type(exc).__name__})", code="protocol"
            ) from exc
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            # Only a 2xx body is parsed by us rather than by the library's error path.
            raise unreadable_acceptance("Twilio", type(exc).__name__) from exc

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        sid = self.create(address, **self.message_parameters(address, message)).sid
        if not isinstance(sid, str) or not sid:
            raise unreadable_acceptance("Twilio", f"sid {sid!r}")
        return SendReceipt(provider_message_id=sid)

    def close(self) -> None:
        with self._lock:
            http_clients, self._http_clients = self._http_clients, []
        for http_client in http_clients:
            if http_client.session is not None:
                http_client.session.close()
        self._local = threading.local()
