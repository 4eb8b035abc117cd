"""GET /healthz (200 healthy, 503 not) for uptime checks, and GET /metrics for Prometheus.

Anyone may ask whether the service is healthy; only the cron or metrics secret or an
active staff user learns why (the checks name roles and tables). ``/metrics`` takes only
``METRICS_SECRET`` (empty: off). An anonymous caller gets a verdict cached for
``ANONYMOUS_VERDICT_SECONDS``, so a flood costs one report per process per interval.
"""

from __future__ import annotations

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console import metrics
from console.health import check_health
from core.config import NudgeConfig
from scheduled_sends.queue.transitions import database_now
from sweeps.cron_routes import carries_secret, refusal

ANONYMOUS_VERDICT_SECONDS = 10
_VERDICT_KEY = "nudge:healthz:anonymous-verdict"


def may_see_details(request: HttpRequest) -> bool:
    user = request.user
    return (
        carries_secret(request, "CRON_SECRET")
        or carries_secret(request, "METRICS_SECRET")
        or (user.is_active and user.is_staff)
    )


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    if not may_see_details(request):
        ok = cache.get_or_set(_VERDICT_KEY, lambda: check_health().ok, ANONYMOUS_VERDICT_SECONDS)
        return JsonResponse({"ok": ok}, status=200 if ok else 503)
    report = check_health()
    cache.set(_VERDICT_KEY, report.ok, ANONYMOUS_VERDICT_SECONDS)
    # Counts and check names only: nothing here identifies a user.
    return JsonResponse(report.as_dict(), status=200 if report.ok else 503)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus scrapes with the metrics bearer secret (``authorization`` in its
    scrape config); anyone else, the cron caller included, is refused."""
    refused = refusal(request, "METRICS_SECRET")
    if refused is not None:
        return refused
    now = database_now()
    body = metrics.render(now, NudgeConfig.from_settings(), check_health(now))
    return HttpResponse(body, content_type=metrics.CONTENT_TYPE)
