"""Development or a real deployment: the project's one notion of it.

The console channel prints a user's private titles; it exists for development
only, and both the hold rules (``accounts.rules``) and the channel itself ask
here before letting it "send".
"""

from __future__ import annotations

from django.conf import settings

NOT_IN_PRODUCTION = "the console channel is for development only; link Telegram or WhatsApp"


def development() -> bool:
    """DEBUG on, or the embedded database (neither means a real deployment), or a
    server that allows the console channel explicitly (``ALLOW_CONSOLE_CHANNEL``:
    staging, CI)."""
    return bool(settings.DEBUG or settings.EMBEDDED_DATABASE or settings.ALLOW_CONSOLE_CHANNEL)
