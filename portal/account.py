"""Linking an address to a person, and what their messages from it do.

A chat or number becomes a person's channel only through their own
confirmation (``link_address``, from the Telegram ``/start`` code or the
WhatsApp code); "/stop" and "STOP" name only an address, so the directory
(``ChannelAddress``) says whose it is before any scope is chosen. The settings
themselves are written through ``accounts.actions``; after a change, the user
is re-materialised (``refresh_queue``) so the queue follows at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from accounts.actions import PAUSED_BY_STOP, ensure_settings, pause, resume
from accounts.models import Channel, DeliverySettings
from portal.models import ChannelAddress, OptInRecord
from portal.tokens import address_digest
from scheduled_sends.materialize import refresh_queue
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.portal")


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
    if delivery.paused and delivery.paused_reason in PAUSED_BY_STOP.values():
        resume(delivery)
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
            pause(delivery, reason, now)
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
    stop_reason = PAUSED_BY_STOP[channel]
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        if linked_address(delivery, channel) != address:
            return InboundResult(None, False)
        changed = delivery.paused and delivery.paused_reason == stop_reason
        if changed:
            resume(delivery)
            delivery.save()
            OptInRecord.objects.create(
                user_id=user_id, channel=channel, address=address, method=method, recorded_at=now
            )
    if changed:
        refresh_queue(user_id, now)
    return InboundResult(user_id, changed)
