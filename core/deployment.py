"""Development or a real deployment: the project's one notion of it.

The console channel prints a user's private titles, so it is allowed only in
development or where ``ALLOW_CONSOLE_CHANNEL`` says so (staging, CI).
"""

from __future__ import annotations

from django.conf import settings

NOT_IN_PRODUCTION = "the console channel is for development only; link Telegram or WhatsApp"


def development() -> bool:
    """DEBUG on, or the embedded database."""
    return bool(settings.DEBUG or settings.EMBEDDED_DATABASE)


def console_channel_allowed() -> bool:
    """In development, or where the server allows the console channel explicitly."""
    return development() or bool(settings.ALLOW_CONSOLE_CHANNEL)
