"""The sweep run log: read-only, because it is what tells a quiet minute from an outage."""

from __future__ import annotations

from django.contrib import admin

from core.admin_readonly import ReadOnlyAdmin
from core.display import instant_column
from scheduled_sends.models import SweepRun


@admin.register(SweepRun)
class SweepRunAdmin(ReadOnlyAdmin):
    list_display = ("started", "sweep", "status", "acted_for", "finished", "summary")
    started = instant_column("started_at", "started")
    acted_for = instant_column("as_of", "acted for")
    finished = instant_column("finished_at", "finished")
    fields = ("sweep", "status", "started", "acted_for", "finished", "summary", "counts", "error")
    readonly_fields = fields
    list_filter = ("sweep", "status")
    # "cycle 14:45Z" lists one cycle's participants; a host (or host:pid) one
    # machine's runs, which the run's counts name (``participant``).
    search_fields = ("summary", "counts")
    date_hierarchy = "started_at"
    ordering = ("-started_at",)
