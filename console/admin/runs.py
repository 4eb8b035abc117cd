"""The sweep run log: read-only, because it is what tells a quiet minute from an outage."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from django.contrib import admin
from django.contrib.admin.utils import display_for_value
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin_readonly import ReadOnlyAdmin
from core.display import instant_column, when
from scheduled_sends.models import SweepRun


@admin.register(SweepRun)
class SweepRunAdmin(ReadOnlyAdmin):
    list_display = ("started", "sweep", "status", "acted_for", "finished", "summary")
    started = instant_column("started_at", "started")
    acted_for = instant_column("as_of", "acted for")
    finished = instant_column("finished_at", "finished")
    fields = (
        "sweep",
        "status",
        "started",
        "acted_for",
        "finished",
        "summary",
        "counts_table",
        "error",
    )
    readonly_fields = fields
    list_filter = ("sweep", "status")
    # "cycle 14:45Z" finds one cycle's runs; a host (or host:pid), one machine's.
    search_fields = ("summary", "counts")
    date_hierarchy = "started_at"
    ordering = ("-started_at",)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        """The run's title, its start written as every other instant (zone named, UTC on hover)."""
        if obj is not None and obj.started_at:
            context["subtitle"] = format_html(
                "{} {} at {}", obj.sweep, obj.status, when(obj.started_at, seconds=True)
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="counts")
    def counts_table(self, obj: SweepRun) -> SafeString:
        """The run's counts as a table, a row per count; a nested count's key is its
        path (``lateness.p50_seconds``), its value written as the admin writes any."""
        rows = format_html_join(
            "", '<tr><th scope="row">{}</th><td>{}</td></tr>', _flat(obj.counts)
        )
        table = '<table class="nudge-counts"><tbody>{}</tbody></table>'
        return format_html(table, rows) if rows else "none"


def _flat(counts: Mapping, path: str = "") -> Iterator[tuple[str, str]]:
    for key, value in counts.items():
        if isinstance(value, Mapping) and value:
            yield from _flat(value, f"{path}{key}.")
        else:
            yield f"{path}{key}", "none" if value == {} else display_for_value(value, "-") or "-"
