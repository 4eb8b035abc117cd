"""One way of writing an instant (and a span, and a count) everywhere staff read them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.utils.html import format_html
from django.utils.safestring import SafeString


def when(instant: datetime | None, empty: str = "never") -> SafeString:
    """An instant, written one way everywhere: ``2026-12-02 22:22 UTC``; the page's
    script rewrites it into the viewer's zone, the UTC instant stays on hover."""
    if instant is None:
        return format_html("{}", empty)
    utc = instant.astimezone(UTC)
    return format_html(
        '<time class="nudge-time" datetime="{}" title="{}">{}</time>',
        utc.isoformat(),
        f"{utc:%Y-%m-%d %H:%M:%S} UTC",
        f"{utc:%Y-%m-%d %H:%M} UTC",
    )


def when_text(instant: datetime, seconds: bool = True) -> str:
    """An instant as plain text, in UTC and saying so: ``2026-12-02 22:22:05 UTC``,
    for places no script rewrites (a page's title, an object's name)."""
    shape = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return f"{instant.astimezone(UTC):{shape}} UTC"


def instant_column(field_name: str, description: str) -> Callable:
    """A read-only admin column (list or form) for a timestamp, written as ``when`` writes it."""

    def column(model_admin, obj) -> SafeString:
        return when(getattr(obj, field_name), empty="-")

    column.short_description = description
    column.admin_order_field = field_name
    return column


def duration(seconds: float) -> str:
    """A span in the unit a person would say: 90 s, 2 minutes, 3 hours."""
    seconds = round(seconds)
    if seconds < 120 and seconds % 60:
        return f"{seconds} seconds"
    if seconds < 2 * 3600:
        minutes = seconds // 60
        return "1 minute" if minutes == 1 else f"{minutes} minutes"
    return f"{seconds // 3600} hours"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
