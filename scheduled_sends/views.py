"""GET /healthz, the health report for uptime checks (200 healthy, 503 not), and
GET /metrics, the same and more in Prometheus' text format for the cron caller.

Anyone may ask whether the service is healthy; only the cron caller (its
bearer secret) or a signed-in active staff user learns why: the checks' text
names roles, tables and error classes, and the figures describe the queue —
an attacker's map, and none of an uptime monitor's business.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.config import NudgeConfig
from scheduled_sends import metrics
from scheduled_sends.cron_routes import carries_cron_secret, refusal
from scheduled_sends.health import check_health
from scheduled_sends.queue.transitions import database_now


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


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus scrapes with the cron bearer secret (``authorization`` in its
    scrape config); anyone else is refused as by the cron routes."""
    refused = refusal(request)
    if refused is not None:
        return refused
    now = database_now()
    body = metrics.render(now, NudgeConfig.from_settings(), check_health(now))
    return HttpResponse(body, content_type=metrics.CONTENT_TYPE)
