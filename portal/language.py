"""The user area in the person's own language and clock, saved on their delivery settings:
the first visit sets both from the browser's ``Accept-Language``, then only Settings changes
them. No ``LocaleMiddleware``: the admin and the signed-out pages keep the site's language."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation
from django.views.decorators.http import require_http_methods

from accounts.actions import ensure_settings
from accounts.models import Clock, DeliverySettings
from accounts.rules import preferences_for
from core.zones import zone_of
from tenancy.scope import tenant_scope

View = Callable[..., HttpResponse]


def user_page(*methods: str) -> Callable[[View], View]:
    """A signed-in person's page answering only ``methods``, in their language and zone; their
    settings (made from the browser's preferences on a first visit) are ``request.delivery``."""

    def decorate(view: View) -> View:
        allowed = require_http_methods(list(methods))(view)

        @login_required
        @wraps(view)
        def page(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            user_id = request.user.pk
            with tenant_scope(user_id):
                accept = request.headers.get("Accept-Language", "")
                request.delivery = ensure_settings(user_id, preferences_for(accept))
            language, zone = request.delivery.language, zone_of(request.delivery.timezone)
            with translation.override(language), timezone.override(zone):
                response = allowed(request, *args, **kwargs)
            response.headers.setdefault("Content-Language", language)
            return response

        return page

    return decorate


def date_formats(delivery: DeliverySettings) -> dict[str, str]:
    """Django ``date`` formats for the person's clock (month and day names follow the
    active language)."""
    time_format = "g:i A" if delivery.clock == Clock.H12 else "H:i"
    return {
        "time_format": time_format,
        "short_format": f"j M, {time_format}",
        "long_format": f"j M Y, {time_format}",
    }
