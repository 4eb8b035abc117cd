"""The providers' calls into us (Telegram updates, Twilio's inbound messages and receipts),
trusted only for Telegram's secret header or Twilio's signature (no session, no CSRF), and
idempotent. Editing a tapped message is the one outbound call; its failure only leaves
the old text. A receipt only moves a row's status forward (``record_receipt``).
"""

from __future__ import annotations

import logging
from xml.sax.saxutils import escape

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from twilio.request_validator import RequestValidator

from core import json_input
from core.bearer import is_secret
from core.config import NudgeConfig
from messaging import chat
from messaging.channels.base import SendError
from messaging.telegram import bot as telegram
from messaging.telegram.send import TelegramChannel
from messaging.whatsapp import inbound as whatsapp
from scheduled_sends.queue.transitions import record_receipt

logger = logging.getLogger("nudge.webhooks")
receipts_logger = logging.getLogger("nudge.receipts")

TELEGRAM_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 — a header name
SIGNATURE_HEADER = "X-Twilio-Signature"


@csrf_exempt  # authenticated by the secret header, not a browser session
@require_POST
def telegram_webhook(request: HttpRequest) -> HttpResponse:
    secret = settings.TELEGRAM_WEBHOOK_SECRET
    given = request.headers.get(TELEGRAM_SECRET_HEADER, "")
    if not is_secret(given, secret):
        logger.warning("refused a Telegram update with a missing or wrong secret header")
        return HttpResponseForbidden("invalid secret token")
    try:
        update = telegram.parse_update(json_input.parse(request.body))
    except json_input.JsonInputError:
        update = None
    if update is None:
        return HttpResponse("not an update", status=400, content_type="text/plain")
    calls = telegram.handle_update(update, timezone.now(), NudgeConfig.from_settings())
    if not calls:
        return HttpResponse(status=200)
    answer, *edits = calls
    if edits:
        # Say on the message what the tap did; a refusal only leaves the old text.
        channel = TelegramChannel()
        try:
            for edit in edits:
                channel.call(**edit)
        except SendError as exc:
            logger.warning("editing the tapped message failed", extra={"error": str(exc)})
        finally:
            channel.close()
    return JsonResponse(telegram.as_json(answer))


@csrf_exempt  # signed by Twilio instead
@require_POST
def twilio_inbound(request: HttpRequest) -> HttpResponse:
    if not signature_is_valid(request, settings.TWILIO_INBOUND_URL):
        logger.warning("refused an inbound Twilio message with a missing or bad signature")
        return HttpResponseForbidden("invalid signature")
    result = whatsapp.handle_inbound(
        request.POST.dict(), timezone.now(), NudgeConfig.from_settings()
    )
    # Twilio answers STOP / START itself; a Snooze, a Done or the chat says what it did.
    message = ""
    if isinstance(result, chat.Answer):
        message = f"<Message>{escape(result.for_whatsapp())}</Message>"
    return HttpResponse(
        f'<?xml version="1.0" encoding="UTF-8"?><Response>{message}</Response>',
        content_type="text/xml",
    )


def signature_is_valid(request: HttpRequest, configured_url: str) -> bool:
    """Whether the request is signed with our auth token for ``configured_url``, the URL
    Twilio was given (derived from PUBLIC_BASE_URL; without it, the request's own)."""
    auth_token = settings.TWILIO_AUTH_TOKEN
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not auth_token or not signature:
        return False
    url = configured_url or request.build_absolute_uri()
    return RequestValidator(auth_token).validate(url, request.POST, signature)


@csrf_exempt  # signed by Twilio instead; there is no browser session to protect
@require_POST
def twilio_status(request: HttpRequest) -> HttpResponse:
    if not signature_is_valid(request, settings.TWILIO_STATUS_CALLBACK_URL):
        receipts_logger.warning("refused a Twilio status callback with a missing or bad signature")
        return HttpResponseForbidden("invalid signature")

    message_sid = request.POST.get("MessageSid", "")
    status = request.POST.get("MessageStatus", "").strip()
    if not (status and record_receipt(message_sid, status, request.POST.get("ErrorCode", ""))):
        # No status, an unknown one or one older than recorded, or a message we do not
        # hold; acknowledged anyway: a non-2xx would only make Twilio report a failure.
        receipts_logger.info(
            "Twilio status callback matched no row to move forward",
            extra={"message_sid": message_sid[:64], "status": status[:32]},
        )
    return HttpResponse(status=204)
