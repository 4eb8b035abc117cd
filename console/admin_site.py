"""The support console: Django's admin, each view for an active staff user run and
rendered in ``support_scope()`` (one transaction as the NOLOGIN support role) rather
than a loosened policy; login, logout, anonymous and non-staff requests never enter
it. Instants read in the viewer's own zone (their DeliverySettings, else UTC). The index
says health's checks, the backlog and the pacing as sentences linking where the reader
may look."""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import wraps
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import get_object_or_404
from django.template.response import SimpleTemplateResponse, TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from console import health, panels
from console.admin_guard import SupportGuard, audit_read, behind
from core.config import NudgeConfig
from core.display import duration, plural, when
from core.zones import zone_of
from pacing import pacer
from scheduled_sends.models import ScheduledSend
from tenancy.scope import support_scope

logger = logging.getLogger("nudge.admin")

# Marks every view wrapper that enters the support scope (tests walk the URLs for it).
SUPPORT_SCOPED_ATTR = "support_scoped"


@dataclass(frozen=True)
class Links:
    """Where a line may send the reader; empty where the reader may not look."""

    queue: str = ""
    runs: str = ""

    @classmethod
    def for_user(cls, user) -> Links:
        def changelist(model: str) -> str:
            perms = (f"scheduled_sends.{action}_{model}" for action in ("view", "change"))
            allowed = any(user.has_perm(perm) for perm in perms)
            return reverse(f"admin:scheduled_sends_{model}_changelist") if allowed else ""

        return cls(queue=changelist("scheduledsend"), runs=changelist("sweeprun"))

    def resolve(self, link: str) -> str:
        """A check's ``queue?…``/``runs?…`` link as this reader's URL; anchors as they are."""
        if not link or link.startswith("#"):
            return link
        changelist, query = link.split("?", 1)
        base = getattr(self, changelist)
        return f"{base}?{query}" if base else ""


def health_lines(checks: list[health.HealthCheck], links: Links) -> list[health.HealthCheck]:
    """Health's checks with their links resolved for the reader, failing ones first."""
    lines = [replace(check, link=links.resolve(check.link)) for check in checks]
    return sorted(lines, key=lambda line: (line.ok, not line.warning))


def pacing_lines(states: list[pacer.BudgetState]) -> list[health.HealthCheck]:
    """Each shared rate in force: at its setting, lowered by a 429, or paused."""
    lines = []
    for state in states:
        calendar = state.budget.startswith(("google", "graph"))
        scale, unit = (60, "/min") if calendar else (1, "/s")
        rate, ceiling = state.rate * scale, state.ceiling * scale
        if state.lowered:
            text = (
                f"{state.budget} paced at {rate:,.1f}{unit} of its configured "
                f"{ceiling:,.1f}{unit}: lowered by a 429, climbing back."
            )
        else:
            text = f"{state.budget} paced at its configured {ceiling:,.1f}{unit}."
        if state.paused_for >= 1:
            text += f" Paused for {duration(state.paused_for)} more (Retry-After)."
        lines.append(health.HealthCheck(f"pacing_{state.budget}", True, text))
    return lines


class NudgeAdminSite(admin.AdminSite):
    site_header = "nudge support"
    site_title = "nudge support"
    index_title = "Support console"
    site_url = None  # the service has no pages of its own to "view"
    enable_nav_sidebar = False  # the queue's list is wide; give it the room
    index_template = "admin/nudge_index.html"

    def register(self, model_or_iterable, admin_class=None, **options) -> None:
        """Every admin gets the shared lookup guard and read audit (``admin_guard``)."""
        super().register(
            model_or_iterable, behind(SupportGuard, admin_class or admin.ModelAdmin), **options
        )

    def admin_view(self, view: Callable, cacheable: bool = False) -> Callable:
        """Django's staff check (a redirect to login) and CSRF protection, then the scope."""
        if view == self.logout:
            # Logout touches nothing but the session; it needs no tenant rows.
            return super().admin_view(view, cacheable)

        @wraps(view)
        def scoped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not self.has_permission(request):
                # Unreachable through admin_view; never widen access if it is not.
                return view(request, *args, **kwargs)
            if view == self.index:
                # check_health enters its own scope, and scopes refuse to nest.
                kwargs["health_made"] = _run_check_health()
            with support_scope(), timezone.override(_viewer_zone(request)):
                response = view(request, *args, **kwargs)
                if isinstance(response, SimpleTemplateResponse):
                    response.render()  # lazily, it would query after the scope ended
            return response

        setattr(scoped, SUPPORT_SCOPED_ATTR, True)
        return super().admin_view(scoped, cacheable)

    def index(self, request: HttpRequest, extra_context: dict | None = None, health_made=None):
        """The state in words, every check as a sentence, and the queue's pictures."""
        config = NudgeConfig.from_settings()
        report = _health_report(health_made)
        links = Links.for_user(request.user)
        lines = health_lines(report.checks, links) + pacing_lines(pacer.rates_in_force(config))
        now = timezone.now()
        context = {
            "nudge_health": report,
            "nudge_lines": lines,
            "nudge_as_of": when(now),
            # Counts across every tenant: only for staff who may view the queue.
            "nudge_charts": panels.activity_panels(now, config) if links.queue else None,
            **(extra_context or {}),
        }
        return super().index(request, extra_context=context)

    def get_urls(self) -> list:
        return [
            path(
                "nudge/user/<int:user_id>/activity/",
                self.admin_view(self.user_activity),
                name="nudge_user_activity",
            ),
            *super().get_urls(),
        ]

    def user_activity(self, request: HttpRequest, user_id: int) -> HttpResponseBase:
        """The landing page's three charts for one user's nudges."""
        links = Links.for_user(request.user)
        if not links.queue:
            raise PermissionDenied
        user = get_object_or_404(get_user_model(), pk=user_id)
        # Counts, not rows, but of one tenant's queue: audited like any staff read of it.
        filters = {"owner": str(user.pk), "view": "charts"}
        audit_read(request, ScheduledSend, [], filters)
        now = timezone.now()
        context = {
            **self.each_context(request),
            "title": f"Nudges of {user.get_username()}",
            "subtitle": None,
            "nudge_user": user,
            "nudge_as_of": when(now),
            "nudge_charts": panels.activity_panels(
                now, NudgeConfig.from_settings(), user_id=user.pk
            ),
            "nudge_queue_url": links.resolve(f"queue?owner={user.pk}"),
        }
        request.current_app = self.name
        return TemplateResponse(request, "admin/nudge_user_activity.html", context)


def _viewer_zone(request: HttpRequest) -> zoneinfo.ZoneInfo:
    """The staff member's own zone (their DeliverySettings, read in the support scope)."""
    settings = DeliverySettings.objects.filter(user_id=request.user.pk)
    return zone_of(settings.values_list("timezone", flat=True).first() or "")


def _run_check_health() -> Any:
    """The health report, or the exception that stopped it (the index must still render)."""
    try:
        return health.check_health()
    except Exception as exc:
        logger.exception("check_health failed on the admin index")
        return exc


def _health_report(report: Any) -> health.HealthReport:
    """check_health's report; when it failed, health's checks of the sweeps and claims,
    counted as health counts them, under the admin's scope, and what is due and unsent."""
    if isinstance(report, health.HealthReport):
        return report
    config = NudgeConfig.from_settings()
    error = f"check_health failed: {type(report).__name__}"
    partial = health.HealthReport(as_of=timezone.now(), error=error)
    health.runs_and_claims(partial, config, ScheduledSend.objects.due_counts(partial.as_of, config))
    due = plural(partial.figures["due_backlog"], "nudge")
    partial.checks.append(health.HealthCheck("due_backlog", True, f"{due} due and not yet sent."))
    return partial
