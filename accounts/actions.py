"""Every write to a person's delivery state: by the person, by support, by a provider.
``update_settings`` is the one way settings change; once committed it announces
``plan_changed`` so the user is re-planned at once. Each function opens the
user's ``tenant_scope`` (callers must not hold one), or joins the admin's ``support_scope``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import translation
from django.utils.translation import gettext_noop

from accounts.models import Channel, DeliverySettings
from tenancy.scope import SUPPORT_SCOPE, current_scope, tenant_scope

logger = logging.getLogger("nudge.accounts")

# Sent after a change to what a person's nudges are planned from (their delivery settings, a
# follow-up, a linked address) committed, with ``user_id`` and ``now``: ``sweeps`` re-plans them.
plan_changed = Signal()

# Pause and unreachable reasons are stored in English, as support reads them; the person's
# pages translate them (marked here for the catalogs).
PAUSED_BY_USER = gettext_noop("you paused nudges")
PAUSED_BY_STOP = {
    Channel.TELEGRAM: gettext_noop("you sent /stop to the bot in Telegram"),
    Channel.WHATSAPP: gettext_noop("you replied STOP on WhatsApp"),
}

# What ``update_settings`` may change: the settings page's fields and the admin form's.
EDITABLE = frozenset(
    {
        "enabled",
        "channel",
        "timezone",
        "language",
        "clock",
        "default_lead_minutes",
        "quiet_start",
        "quiet_end",
        "paused",
        "whatsapp_number",
        "telegram_chat_id",
        "agenda_at",
    }
)


def ensure_settings(
    user_id: int, first_visit: Mapping[str, object] | None = None
) -> DeliverySettings:
    """The user's settings, made on first use with the configured default lead and
    ``first_visit`` (the browser's language and clock). Inside the user's scope (or support's)."""
    delivery, _ = DeliverySettings.objects.get_or_create(
        user_id=user_id, defaults=first_visit or {}
    )
    return delivery


def language_of(user_id: int) -> str:
    """The user's saved language, the site's default before they have settings. Inside
    the user's scope."""
    found = DeliverySettings.objects.filter(user_id=user_id).values_list("language", flat=True)
    return found.first() or settings.LANGUAGE_CODE


@contextlib.contextmanager
def in_their_language(user_id: int) -> Iterator[str]:
    """The user's saved language active, for what is said to them (read in their scope,
    which is closed again before the caller goes on)."""
    with tenant_scope(user_id):
        language = language_of(user_id)
    with translation.override(language):
        yield language


def announce_change(user_id: int, now: datetime) -> None:
    """Tell the floors above that what should be queued for ``user_id`` changed,
    now or, inside a scope, when its transaction commits."""

    def send() -> None:
        plan_changed.send(sender=DeliverySettings, user_id=user_id, now=now)

    if current_scope() is None:
        send()
    else:
        transaction.on_commit(send)


def pause(delivery: DeliverySettings, reason: str, now: datetime) -> None:
    delivery.paused = True
    delivery.paused_reason = reason
    delivery.paused_at = now


def resume(delivery: DeliverySettings) -> None:
    delivery.paused = False
    delivery.paused_reason = ""
    delivery.paused_at = None


def update_settings(user_id: int, changes: Mapping[str, object], now: datetime) -> DeliverySettings:
    """Apply ``changes`` (``paused`` on records the user's own reason; off clears any pause),
    validated as the model says, and re-queue; ``ValidationError`` saves nothing."""
    unknown = set(changes) - EDITABLE
    if unknown:
        raise ValueError(f"not a setting update_settings may change: {sorted(unknown)}")
    # The user's own scope; inside the admin's support scope, that one.
    in_support = current_scope() == SUPPORT_SCOPE
    with contextlib.nullcontext() if in_support else tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        for name, value in changes.items():
            if name == "paused":
                if value and not delivery.paused:
                    pause(delivery, PAUSED_BY_USER, now)
                elif not value and delivery.paused:
                    resume(delivery)
            else:
                setattr(delivery, name, value)
        delivery.full_clean(exclude=["user"])
        delivery.save()
    announce_change(user_id, now)
    return delivery


# Provider answers that mean "this person cannot be reached here": Telegram 403s,
# Twilio 21610 (replied STOP) and 63024 (invalid recipient).
_TELEGRAM_UNREACHABLE = {
    "bot was blocked by the user": gettext_noop("you blocked the bot in Telegram"),
    "user is deactivated": gettext_noop("your Telegram account is deactivated"),
}
_WHATSAPP_UNREACHABLE = {
    "21610": gettext_noop("you replied STOP on WhatsApp, so WhatsApp refuses our messages"),
    "63024": gettext_noop("WhatsApp says this number cannot receive messages"),
}


def note_permanent_failure(
    user_id: int, channel: str, code: str, message: str, now: datetime
) -> None:
    """Deliver's hook for a permanent send error: when it means the provider cannot reach
    the user on ``channel``, stop sending there until they relink. Writes the flag only
    (a delivery run must not re-plan) and never raises: the sweep must go on."""
    if channel == Channel.TELEGRAM and code == "403":
        lowered = message.lower()
        reason = next(
            (words for needle, words in _TELEGRAM_UNREACHABLE.items() if needle in lowered), None
        )
    else:
        reason = _WHATSAPP_UNREACHABLE.get(code) if channel == Channel.WHATSAPP else None
    if reason is None:
        return
    try:
        with tenant_scope(user_id):
            marked = (
                DeliverySettings.objects.filter(user_id=user_id, channel=channel)
                .exclude(unreachable_channel=channel)
                .update(unreachable_channel=channel, unreachable_reason=reason, unreachable_at=now)
            )
    except Exception:
        logger.exception("marking a channel unreachable failed", extra={"user_id": user_id})
        return
    if marked:
        logger.warning(
            "channel unreachable; nudges held until the user relinks",
            extra={"user_id": user_id, "channel": channel},
        )
