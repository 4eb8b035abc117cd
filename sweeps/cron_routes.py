"""POST /cron/materialize, /cron/deliver and /cron/sync_changed: the sweeps and the minute
job for hosts whose cron speaks HTTP, with ``Authorization: Bearer <CRON_SECRET>`` (empty:
the routes are off). Deliver runs in the request for its budget plus one send: the server's
timeout must be longer.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.bearer import bearer_token, is_secret
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from sweeps.sync_changed import run_sync_changed

logger = logging.getLogger("nudge.cron")


# Per bearer secret setting: the realm a 401 names, and what an empty one turns off.
REALMS = {
    "CRON_SECRET": ("cron", "cron routes are disabled"),
    "METRICS_SECRET": ("metrics", "metrics are disabled"),
}


def carries_secret(request: HttpRequest, setting: str) -> bool:
    """Whether the request's bearer token is the non-empty secret in ``setting``."""
    return is_secret(bearer_token(request), getattr(settings, setting))


def refusal(request: HttpRequest, setting: str) -> JsonResponse | None:
    """The refusal to answer (403: secret empty, 401: not presented), or None."""
    realm, disabled = REALMS[setting]
    if not getattr(settings, setting):
        return JsonResponse({"ok": False, "error": disabled}, status=403)
    if not carries_secret(request, setting):
        wrong = f"missing or wrong {realm} secret"
        response = JsonResponse({"ok": False, "error": wrong}, status=401)
        response["WWW-Authenticate"] = f'Bearer realm="{realm}"'
        return response
    return None


@csrf_exempt  # a machine caller with a bearer secret, not a browser session
@never_cache
@require_POST
def cron_sweep(request: HttpRequest, sweep: str) -> JsonResponse:
    """Run the sweep the route names (``urls.py``), never the caller: 200 with its report
    when it went well, 500 when not."""
    refused = refusal(request, "CRON_SECRET")
    if refused is not None:
        return refused
    run = {
        "materialize": run_materialize,
        "deliver": run_deliver,
        "sync_changed": run_sync_changed,
    }[sweep]
    try:
        report = run()
    except Exception as exc:
        # The run log has already recorded the failure; say which, not how.
        logger.exception("cron-triggered %s run raised", sweep)
        return JsonResponse(
            {"ok": False, "summary": f"{sweep}: failed ({type(exc).__name__})"}, status=500
        )
    payload = {**report.as_dict(), "summary": report.summary()}
    return JsonResponse(payload, status=200 if report.ok else 500)
