"""Linking a WhatsApp number (a code sent by template, typed back on the website; a
failure in words the person can act on, its cause redacted in the ``nudge.whatsapp`` log),
and inbound messages: STOP / START (``OptOutType`` wins), a quick-reply token, "snooze" /
"done", or anything else a linked person writes (``messaging.chat``).
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext, gettext_lazy, gettext_noop

from accounts.models import Channel, validate_e164
from core.config import NudgeConfig
from messaging import addresses, chat, chat_words, nudge_actions
from messaging.channels.base import SendError
from messaging.models import TwilioMessageSeen
from messaging.whatsapp import send
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.whatsapp")

_MESSAGE_SID = re.compile(r"[A-Z]{2}[0-9a-f]{32}")
_NUMBER_REFUSED = gettext_lazy(
    "WhatsApp could not reach that number. Check it, with its country code, and try again."
)
# The words for Twilio's refusals the person can act on: the number itself (invalid, not
# mobile, not on WhatsApp), or a number that replied STOP to ours.
LINK_ERRORS = {
    21211: _NUMBER_REFUSED,
    21614: _NUMBER_REFUSED,
    63003: _NUMBER_REFUSED,
    21610: gettext_lazy(
        "That number has stopped our WhatsApp messages. Send START to us on WhatsApp, "
        "then ask for a new code."
    ),
}
NOT_WORKING = gettext_lazy(
    "WhatsApp linking is not working on this server right now; try again later."
)


class WhatsAppLinkError(Exception):
    """The code could not be sent; the message is safe to show to the user."""


def link_error(code: int = 0) -> WhatsAppLinkError:
    """What the person reads when sending the code failed with Twilio's ``code``."""
    return WhatsAppLinkError(str(LINK_ERRORS.get(code, NOT_WORKING)))


LINKING_SETTINGS = (*send.SENDING_SETTINGS, "TWILIO_CONFIRM_CONTENT_SID")


def channels_offered() -> dict[str, bool]:
    """Which chat channels a person can link on this server: those whose settings are set."""
    return {
        "telegram": bool(settings.TELEGRAM_BOT_USERNAME),
        "whatsapp": not send.missing_settings(LINKING_SETTINGS),
    }


def send_code(user_id: int, number: str, now: datetime, config: NudgeConfig) -> None:
    """Validate the number, make a code and send it through the confirmation template."""
    number = number.strip()
    try:
        validate_e164(number)
    except ValidationError as exc:
        raise WhatsAppLinkError(exc.messages[0]) from None
    if not number:
        raise WhatsAppLinkError(gettext("Enter your WhatsApp number."))
    missing = send.missing_settings(LINKING_SETTINGS)
    if missing:
        logger.warning("cannot send a WhatsApp link code: %s empty", ", ".join(missing))
        raise link_error()
    try:
        with tenant_scope(user_id):
            code = addresses.new_whatsapp_code(user_id, number, now, config)
    except addresses.TooManyCodes:
        raise WhatsAppLinkError(
            gettext("Too many codes were sent in the last hour; try again later.")
        ) from None
    channel = send.WhatsAppChannel()
    try:
        channel.create(
            number,
            content_sid=settings.TWILIO_CONFIRM_CONTENT_SID,
            content_variables=json.dumps({"1": code}),
        )
    except SendError as exc:
        refused = int(exc.code) if exc.code.isdigit() else 0
        logger.warning(
            "could not send a WhatsApp link code: %s", exc.describe(), extra={"user_id": user_id}
        )
        raise link_error(refused) from None
    finally:
        channel.close()


def first_time(message_sid: str, now: datetime, config: NudgeConfig) -> bool:
    """Record an inbound MessageSid; False for a replay (Twilio's signature has no
    timestamp) or a message without one. Prunes sids past ``NUDGE_INBOUND_SEEN_DAYS``."""
    if not _MESSAGE_SID.fullmatch(message_sid):
        return False
    cutoff = now - config.inbound_seen_retention
    TwilioMessageSeen.objects.filter(received_at__lt=cutoff).delete()
    _, created = TwilioMessageSeen.objects.get_or_create(message_sid=message_sid)
    return created


def confirm_code(user_id: int, code: str, now: datetime) -> bool:
    """Bind the number when the code is right, recording the opt-in."""
    linked = addresses.link_address(
        user_id,
        Channel.WHATSAPP,
        gettext_noop("entered the code sent to this number on the website"),
        now,
        lambda: addresses.use_whatsapp_code(user_id, code, now),
    )
    return linked is not None


def handle_inbound(
    params: dict[str, str], now: datetime, config: NudgeConfig
) -> addresses.InboundResult | chat.Answer | None:
    """Pause or resume the sender's nudges, Snooze / Done one, or answer what they
    wrote (``messaging.chat``: a capture, "undo", /next…); None when there is no answer."""
    opt_out = params.get("OptOutType", "").strip().lower()
    number = params.get("From", "").strip().removeprefix("whatsapp:")
    payload = params.get("ButtonPayload", "").strip()
    body = params.get("Body", "")
    word = opt_out if opt_out in ("stop", "start") else chat_words.reply_word(payload or body)
    if not number or not (word or payload or body.strip()):
        return None
    if not first_time(params.get("MessageSid", ""), now, config):
        return None
    if payload and word is None:  # a button of the actions template: its signed token
        return chat.tap(Channel.WHATSAPP, number, payload, now, config)
    if word in ("snooze", "done"):
        return nudge_actions.reply(Channel.WHATSAPP, number, word, now, config)
    if word in ("stop", "start"):
        return addresses.stop_or_start(Channel.WHATSAPP, number, word, now)
    return chat.answer(Channel.WHATSAPP, number, body, now, config)
