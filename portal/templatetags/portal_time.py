"""How the user area writes an instant: in the active zone, on the person's clock, the
year when it is not this year's, and "now" for a nudge whose time has come."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _

register = template.Library()


@register.filter
def when(moment: datetime | None, time_format: str = "H:i") -> str:
    """``Thu 3 Dec, 14:05``; ``Mon 4 Jan 2027, 09:00`` in another year; "now" for None;
    ``time_format`` is the person's clock (``portal.language.date_formats``)."""
    if moment is None:
        return _("now")
    local = timezone.localtime(moment)
    same_year = local.year == timezone.localtime(timezone.now()).year
    day = "D j M" if same_year else "D j M Y"
    return date_format(local, f"{day}, {time_format or 'H:i'}")


@register.filter
def on_another_day(entry) -> bool:
    """Whether an upcoming nudge's subject starts on another day than the nudge goes (a
    reminder a day ahead): then the page says the subject's day, not only its time."""
    nudged = timezone.localtime(entry.at or timezone.now()).date()
    return timezone.localtime(entry.starts_at).date() != nudged
