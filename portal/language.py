"""The user area in the person's own language and clock.

A signed-in person's pages are written in the language saved on their
delivery settings (``accounts.models.Language``), activated for the request by
:func:`in_users_language`. The first page that makes their settings row — the
first visit after signing up — sets that language and the 12/24-hour clock from
the browser's ``Accept-Language`` (``accounts.rules.preferences_for``); after
that only the Settings page changes them. There is no ``LocaleMiddleware``: the
admin and the signed-out pages stay in the site's language.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.utils import translation

from accounts.actions import ensure_settings
from accounts.models import Clock, DeliverySettings
from accounts.rules import preferences_for
from tenancy.scope import tenant_scope

View = Callable[..., HttpResponse]


def settings_on_first_visit(request: HttpRequest) -> DeliverySettings:
    """The signed-in person's settings; made now, from their browser, if this is the first."""
    user_id = request.user.pk
    with tenant_scope(user_id):
        return ensure_settings(user_id, preferences_for(request.headers.get("Accept-Language", "")))


def in_users_language(view: View) -> View:
    """Run ``view`` (behind ``login_required``) in the person's language."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        language = settings_on_first_visit(request).language
        with translation.override(language):
            response = view(request, *args, **kwargs)
        response.headers.setdefault("Content-Language", language)
        return response

    return wrapped


def date_formats(delivery: DeliverySettings) -> dict[str, str]:
    """Django ``date`` formats for the person's clock (month and day names follow the
    active language)."""
    time_format = "g:i A" if delivery.clock == Clock.H12 else "H:i"
    return {
        "clock": delivery.clock,
        "time_format": time_format,
        "short_format": f"j M, {time_format}",
        "long_format": f"j M Y, {time_format}",
        "when_format": f"D j M, {time_format}",
        "when_year_format": f"D j M Y, {time_format}",
    }
