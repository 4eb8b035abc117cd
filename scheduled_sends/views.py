"""GET /healthz: the health report for uptime checks (200 healthy, 503 not).

Anyone may ask whether the service is healthy; only the cron caller (its
bearer secret) or a signed-in active staff user learns why: the checks' text
names roles, tables and error classes, and the figures describe the queue —
an attacker's map, and none of an uptime monitor's business.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from scheduled_sends.cron_routes import carries_cron_secret
from scheduled_sends.health import check_health


def may_see_details(request: HttpRequest) -> bool:
    user = request.user
    return carries_cron_secret(request) or (user.is_active and user.is_staff)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    report = check_health()
    status = 200 if report.ok else 503
    if not may_see_details(request):
        return JsonResponse({"ok": report.ok}, status=status)
    # Counts and check names only: nothing here identifies a user.
    return JsonResponse(report.as_dict(), status=status)
