"""POST /twilio/status: Twilio's delivery receipts for WhatsApp messages, trusted only for
their ``X-Twilio-Signature`` over the URL Twilio was told (not one rebuilt from headers a
proxy may rewrite). ``record_receipt`` only moves a row's status forward.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from twilio.request_validator import RequestValidator

from scheduled_sends.queue.transitions import record_receipt

logger = logging.getLogger("nudge.receipts")

SIGNATURE_HEADER = "X-Twilio-Signature"
KNOWN_STATUSES = frozenset(
    {"accepted", "queued", "sending", "sent", "delivered", "read", "undelivered", "failed"}
)


def signature_is_valid(request: HttpRequest, configured_url: str | None = None) -> bool:
    """Whether the request is signed with our auth token for ``configured_url``, the URL
    Twilio was given (derived from PUBLIC_BASE_URL; without it, the request's own)."""
    auth_token = settings.TWILIO_AUTH_TOKEN
    signature = request.headers.get(SIGNATURE_HEADER, "")
    if not auth_token or not signature:
        return False
    if configured_url is None:
        configured_url = settings.TWILIO_STATUS_CALLBACK_URL
    url = configured_url or request.build_absolute_uri()
    return RequestValidator(auth_token).validate(url, request.POST, signature)


@csrf_exempt  # signed by Twilio instead; there is no browser session to protect
@require_POST
def twilio_status(request: HttpRequest) -> HttpResponse:
    if not signature_is_valid(request):
        logger.warning("refused a Twilio status callback with a missing or bad signature")
        return HttpResponseForbidden("invalid signature")

    message_sid = request.POST.get("MessageSid", "")
    status = request.POST.get("MessageStatus", "").strip().lower()
    error_code = request.POST.get("ErrorCode", "")
    if not message_sid or status not in KNOWN_STATUSES:
        # Acknowledge anyway: a non-2xx would only make Twilio report a webhook failure.
        logger.info("ignored a Twilio status callback", extra={"status": status[:32]})
        return HttpResponse(status=204)

    updated = record_receipt(message_sid, status, error_code)
    if not updated:
        # A message we do not hold, or a status older than the one recorded.
        logger.info(
            "Twilio status callback matched no row to move forward",
            extra={"message_sid": message_sid, "status": status},
        )
    return HttpResponse(status=204)
