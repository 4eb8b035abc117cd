"""One way of writing an instant (and a span, and a count) everywhere staff read them: in
the active zone (the admin activates the staff member's own), named, with the UTC
instant on hover. On the ground floor because app admins use it too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString


def when(instant: datetime | None, empty: str = "never", seconds: bool = False) -> SafeString:
    """An instant, written one way everywhere: ``2026-12-02 23:22 CET``, in the active zone,
    with the UTC instant as its ``title`` (on hover) and ``datetime`` attribute."""
    if instant is None:
        return format_html("{}", empty)
    utc = instant.astimezone(UTC)
    return format_html(
        '<time class="nudge-time" datetime="{}" title="{}">{}</time>',
        f"{utc:%Y-%m-%dT%H:%M:%S}Z",
        f"{utc:%Y-%m-%d %H:%M:%S} UTC",
        when_text(instant, seconds=seconds),
    )


def when_text(instant: datetime, seconds: bool = True) -> str:
    """An instant as plain text, in the active zone and naming it: ``2026-12-02 22:22:05 UTC``."""
    shape = "%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z"
    return f"{timezone.localtime(instant):{shape}}"


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
        return plural(seconds // 60, "minute")
    return f"{seconds // 3600} hours"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
