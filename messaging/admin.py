"""Opt-in records in the support console: when, how and for which address a person agreed."""

from __future__ import annotations

from django.contrib import admin

from core.admin_readonly import ReadOnlyAdmin
from messaging.models import OptInRecord


@admin.register(OptInRecord)
class OptInRecordAdmin(ReadOnlyAdmin):
    list_display = ("user", "channel", "address", "method", "recorded_at", "withdrawn_at")
    list_filter = ("channel",)
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    ordering = ("-recorded_at",)
