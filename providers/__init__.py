"""Calendar providers: one interface (``base.CalendarProvider``), one module per provider."""

from __future__ import annotations

from providers.base import CalendarProvider


def get_provider(name: str) -> CalendarProvider:
    """The provider implementation for a ``Provider`` value."""
    from providers.caldav import CalDavProvider
    from providers.google import GoogleCalendarProvider
    from providers.ics import IcsFeedProvider
    from providers.microsoft import MicrosoftGraphProvider

    for implementation in (
        GoogleCalendarProvider,
        MicrosoftGraphProvider,
        IcsFeedProvider,
        CalDavProvider,
    ):
        if implementation.name == name:
            return implementation()
    raise ValueError(f"unknown calendar provider {name!r}")
