"""The sweep run log: read-only, because it is what tells a quiet minute from an outage."""

from __future__ import annotations

from collections.abc import Mapping

from django.contrib import admin
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
        """The run's counts as a table, key and value, a nested dict as nested rows."""
        return counts_table(obj.counts)


def counts_table(counts: object) -> SafeString:
    if not isinstance(counts, Mapping):
        return format_html("{}", "-" if counts in (None, "") else counts)
    if not counts:
        return format_html("{}", "none")
    rows = format_html_join(
        "",
        '<tr><th scope="row">{}</th><td>{}</td></tr>',
        ((key, _value(value)) for key, value in counts.items()),
    )
    return format_html('<table class="nudge-counts"><tbody>{}</tbody></table>', rows)


def _value(value: object) -> SafeString | str:
    if isinstance(value, Mapping):
        return counts_table(value)
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "-"
    if value is None:
        return "-"
    return str(value)
