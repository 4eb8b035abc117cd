"""Calendar providers: one interface (``base.CalendarProvider``), one module per provider."""

from __future__ import annotations

from calendars.providers.base import CalendarProvider


def get_provider(name: str) -> CalendarProvider:
    """The provider implementation for a ``Provider`` value."""
    from calendars.providers.google import GoogleCalendarProvider
    from calendars.providers.ics import IcsFeedProvider
    from calendars.providers.microsoft import MicrosoftGraphProvider

    implementations: dict[str, type[CalendarProvider]] = {
        "google": GoogleCalendarProvider,
        "microsoft": MicrosoftGraphProvider,
        "ics": IcsFeedProvider,
    }
    try:
        return implementations[name]()
    except KeyError:
        raise ValueError(f"unknown calendar provider {name!r}") from None
