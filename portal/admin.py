"""Support's read-only view of consent: who agreed to messages, when, how, for which address."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from portal.models import OptInRecord


@admin.register(OptInRecord)
class OptInRecordAdmin(admin.ModelAdmin):
    list_display = ("user", "channel", "address", "method", "recorded_at", "withdrawn_at")
    list_filter = ("channel",)
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    ordering = ("-recorded_at",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
