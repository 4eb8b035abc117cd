"""Development or a real deployment: the project's one notion of it. The console channel
prints private titles, so only development or ``ALLOW_CONSOLE_CHANNEL`` allows it."""

from __future__ import annotations

from django.conf import settings

NOT_IN_PRODUCTION = "the console channel is for development only; link Telegram or WhatsApp"


def development() -> bool:
    return bool(settings.DEBUG or settings.EMBEDDED_DATABASE)


def console_channel_allowed() -> bool:
    return development() or bool(settings.ALLOW_CONSOLE_CHANNEL)
