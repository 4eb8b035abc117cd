"""Follow-ups in the support console: read-only, as support sees them."""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone
from django.utils.text import Truncator

from core.admin_readonly import ReadOnlyAdmin
from core.display import instant_column
from followups.models import FollowUp


@admin.register(FollowUp)
class FollowUpAdmin(ReadOnlyAdmin):
    due = instant_column("due_at", "due")
    created = instant_column("created_at", "created")
    list_display = ("id", "title_short", "user", "due", "state", "created")
    list_filter = ("done", ("due_at", admin.DateFieldListFilter))
    list_select_related = ("user",)
    search_fields = ("title", "user__username", "user__email")
    date_hierarchy = "due_at"
    ordering = ("-due_at",)
    fields = ("user", "title", "due", "done", "created")
    readonly_fields = fields

    @admin.display(description="title", ordering="title")
    def title_short(self, obj: FollowUp) -> str:
        return Truncator(obj.title).chars(80)

    @admin.display(description="state", ordering="done")
    def state(self, obj: FollowUp) -> str:
        if obj.done:
            return "done"
        return "past due" if obj.due_at <= timezone.now() else "open"
