"""Which chat channels a person can link on this server: those whose settings are set.
One answer for every page that speaks of linking."""

from __future__ import annotations

from django.conf import settings

from messaging.whatsapp import inbound as whatsapp


def channels_offered() -> dict[str, bool]:
    """``{"telegram": …, "whatsapp": …}``: whether each can be linked here."""
    return {
        "telegram": bool(settings.TELEGRAM_BOT_USERNAME),
        "whatsapp": whatsapp.configured(),
    }
