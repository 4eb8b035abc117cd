"""Opt-in records in the support console: when, how and for which address a person agreed."""

from __future__ import annotations

from django.contrib import admin

from core.admin_readonly import ReadOnlyAdmin
from core.display import instant_column
from messaging.models import OptInRecord


@admin.register(OptInRecord)
class OptInRecordAdmin(ReadOnlyAdmin):
    recorded = instant_column("recorded_at", "recorded at")
    withdrawn = instant_column("withdrawn_at", "withdrawn at")
    list_display = ("user", "channel", "address", "method", "recorded", "withdrawn")
    fields = ("user", "channel", "address", "method", "recorded", "withdrawn", "withdrawn_how")
    readonly_fields = fields
    list_filter = ("channel",)
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    ordering = ("-recorded_at",)
