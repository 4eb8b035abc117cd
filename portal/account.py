"""A user's delivery state, changed by the user, by their messages, or by a provider.

Every function here that reads or writes tenant rows opens the user's own
``tenant_scope`` itself (scopes refuse to nest, so callers must not hold
one), and anything that changes what should be queued ends by
re-materialising that one user (``refresh_queue``), so a change is in the
queue at once rather than at the next sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from accounts.models import Channel, DeliverySettings, default_lead_minutes
from core.config import NudgeConfig
from portal.models import ChannelAddress, OptInRecord
from portal.tokens import address_digest
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.portal")

# Pause reasons, as the user reads them on the settings page.
PAUSED_BY_USER = "you paused nudges"
PAUSED_BY_TELEGRAM_STOP = "you sent /stop to the bot in Telegram"
PAUSED_BY_WHATSAPP_STOP = "you replied STOP on WhatsApp"


def ensure_settings(user_id: int) -> DeliverySettings:
    """The user's settings, created on first use with the configured default lead.

    Must run inside the user's scope.
    """
    delivery, _ = DeliverySettings.objects.get_or_create(
        user_id=user_id,
        defaults={"default_lead_minutes": default_lead_minutes()},
    )
    return delivery


def refresh_queue(user_id: int, now: datetime | None = None) -> None:
    """Re-materialise one user now, so a change does not wait for the next sweep.

    A failure here is logged, not raised: the change itself is saved, and the
    next sweep catches up.
    """
    from scheduled_sends.materialize import materialize_user

    try:
        materialize_user(user_id, now or timezone.now(), NudgeConfig.from_settings())
    except Exception:
        logger.exception(
            "re-materialising a user after a change failed", extra={"user_id": user_id}
        )


def refresh_calendars_and_queue(user_id: int, now: datetime | None = None) -> None:
    """Sync the user's calendars, then re-materialise them: a new connection's
    events are nudged without waiting for the next sweep. Never raises."""
    from calendars.sync import sync_user_connections

    now = now or timezone.now()
    start, end = NudgeConfig.from_settings().subject_window(now)
    try:
        sync_user_connections(user_id, now=now, window_start=start, window_end=end)
    except Exception:
        logger.exception(
            "syncing a user's calendars after a change failed", extra={"user_id": user_id}
        )
    refresh_queue(user_id, now)


def _remember_address(user_id: int, channel: str, address: str) -> None:
    ChannelAddress.objects.update_or_create(
        channel=channel,
        address_digest=address_digest(channel, address),
        defaults={"user_id": user_id},
    )


def owner_of(channel: str, address: str) -> int | None:
    """Who linked this chat or number (the directory; not a tenant read)."""
    return (
        ChannelAddress.objects.filter(
            channel=channel, address_digest=address_digest(channel, address)
        )
        .values_list("user_id", flat=True)
        .first()
    )


def bind_address(delivery: DeliverySettings, channel: str, address: str, method: str, now) -> None:
    """Make ``address`` the user's ``channel`` and deliver there. Inside the user's scope."""
    if channel == Channel.TELEGRAM:
        delivery.telegram_chat_id = address
    else:
        delivery.whatsapp_number = address
        delivery.whatsapp_opted_in_at = now
    delivery.channel = channel
    if delivery.unreachable_channel == channel:
        delivery.unreachable_channel = ""
        delivery.unreachable_reason = ""
        delivery.unreachable_at = None
    if delivery.paused and delivery.paused_reason in (
        PAUSED_BY_TELEGRAM_STOP,
        PAUSED_BY_WHATSAPP_STOP,
    ):
        _resume(delivery)
    delivery.full_clean()
    delivery.save()
    OptInRecord.objects.create(
        user_id=delivery.user_id, channel=channel, address=address, method=method, recorded_at=now
    )
    _remember_address(delivery.user_id, channel, address)


def link_address(user_id: int, channel: str, address: str, method: str, now: datetime) -> None:
    """Bind a confirmed chat or number to the user and start delivering there."""
    with tenant_scope(user_id):
        bind_address(ensure_settings(user_id), channel, address, method, now)
    refresh_queue(user_id, now)


def _pause(delivery: DeliverySettings, reason: str, now: datetime) -> None:
    delivery.paused = True
    delivery.paused_reason = reason
    delivery.paused_at = now


def _resume(delivery: DeliverySettings) -> None:
    delivery.paused = False
    delivery.paused_reason = ""
    delivery.paused_at = None


def linked_address(delivery: DeliverySettings, channel: str) -> str:
    """The chat or number the user has linked for ``channel`` (whether or not in use)."""
    if channel == Channel.TELEGRAM:
        return delivery.telegram_chat_id
    return delivery.whatsapp_number


@dataclass(frozen=True)
class InboundResult:
    """What an inbound command did, for the bot's answer and for tests."""

    user_id: int | None
    changed: bool


def pause_from(channel: str, address: str, reason: str, now: datetime) -> InboundResult:
    """A STOP-like message from a linked ``address``: pause its owner's nudges
    (all of them: "stop" means stop, whichever channel is in use)."""
    user_id = owner_of(channel, address)
    if user_id is None:
        return InboundResult(None, False)
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        if linked_address(delivery, channel) != address:
            return InboundResult(None, False)  # the user has moved on from this address
        changed = not delivery.paused
        if changed:
            _pause(delivery, reason, now)
            delivery.save()
        OptInRecord.objects.filter(
            user_id=user_id, channel=channel, address=address, withdrawn_at=None
        ).update(withdrawn_at=now, withdrawn_how=reason)
    if changed:
        refresh_queue(user_id, now)
    return InboundResult(user_id, changed)


def resume_from(channel: str, address: str, method: str, now: datetime) -> InboundResult:
    """A START-like message: resume nudges that the same channel's STOP paused."""
    user_id = owner_of(channel, address)
    if user_id is None:
        return InboundResult(None, False)
    stop_reason = (
        PAUSED_BY_TELEGRAM_STOP if channel == Channel.TELEGRAM else PAUSED_BY_WHATSAPP_STOP
    )
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        if linked_address(delivery, channel) != address:
            return InboundResult(None, False)
        changed = delivery.paused and delivery.paused_reason == stop_reason
        if changed:
            _resume(delivery)
            delivery.save()
            OptInRecord.objects.create(
                user_id=user_id, channel=channel, address=address, method=method, recorded_at=now
            )
    if changed:
        refresh_queue(user_id, now)
    return InboundResult(user_id, changed)


def set_paused(user_id: int, paused: bool, now: datetime) -> None:
    """The settings page's pause switch."""
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        if paused and not delivery.paused:
            _pause(delivery, PAUSED_BY_USER, now)
        elif not paused and delivery.paused:
            _resume(delivery)
        delivery.save()
    refresh_queue(user_id, now)


# Provider answers that mean "this person cannot be reached here" (see provider facts):
# Telegram 403 for a blocked bot or a deleted account; Twilio 21610 (replied STOP)
# and 63024 (invalid message recipient).
_TELEGRAM_UNREACHABLE = {
    "bot was blocked by the user": "you blocked the bot in Telegram",
    "user is deactivated": "your Telegram account is deactivated",
}
_WHATSAPP_UNREACHABLE = {
    "21610": "you replied STOP on WhatsApp, so WhatsApp refuses our messages",
    "63024": "WhatsApp says this number cannot receive messages",
}


def unreachable_reason(channel: str, code: str, message: str) -> str | None:
    """The user-readable reason a permanent send error means unreachable, else None."""
    if channel == Channel.TELEGRAM and code == "403":
        lowered = message.lower()
        for needle, reason in _TELEGRAM_UNREACHABLE.items():
            if needle in lowered:
                return reason
        return None
    if channel == Channel.WHATSAPP:
        return _WHATSAPP_UNREACHABLE.get(code)
    return None


def mark_unreachable(user_id: int, channel: str, reason: str, now: datetime | None = None) -> bool:
    """Stop sending to a channel the provider says cannot reach the user, until they relink.

    Called by the deliver sweep where it settles a permanent failure, outside
    any scope. Returns whether anything changed (a later failure of the same
    kind changes nothing).
    """
    now = now or timezone.now()
    with tenant_scope(user_id):
        delivery = DeliverySettings.objects.filter(user_id=user_id).first()
        if delivery is None or delivery.channel != channel:
            return False
        if delivery.unreachable_channel == channel:
            return False
        delivery.unreachable_channel = channel
        delivery.unreachable_reason = reason
        delivery.unreachable_at = now
        delivery.save(update_fields=["unreachable_channel", "unreachable_reason", "unreachable_at"])
    logger.warning(
        "channel unreachable; nudges held until the user relinks",
        extra={"user_id": user_id, "channel": channel},
    )
    refresh_queue(user_id, now)
    return True


def note_permanent_failure(user_id: int, channel: str, code: str, message: str) -> None:
    """Deliver's hook for a permanent send error: mark unreachable when it means that.

    Never raises: the row is already settled, and the sweep must go on.
    """
    reason = unreachable_reason(channel, code, message)
    if reason is None:
        return
    try:
        mark_unreachable(user_id, channel, reason)
    except Exception:
        logger.exception("marking a channel unreachable failed", extra={"user_id": user_id})
