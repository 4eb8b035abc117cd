"""GET /healthz: the health report for uptime checks (200 healthy, 503 not)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from scheduled_sends.health import check_health


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    report = check_health()
    # Counts and check names only: nothing here identifies a user.
    return JsonResponse(report.as_dict(), status=200 if report.ok else 503)
