"""Read-only support views of connected calendars and their events.

The secret columns (tokens, a feed's address) are named nowhere below, so no admin
page can render, filter on or probe them. The one write is "resync now", a flag.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.text import Truncator

from calendars.models import CalendarConnection, CalendarEvent, Provider, PushState
from calendars.push.freshness import PUSH_PROVIDERS, push_live
from calendars.sync import Outcome, held_back
from core.admin_readonly import ReadOnlyAdmin
from core.config import NudgeConfig
from core.display import instant_column, when_text


@admin.register(CalendarConnection)
class CalendarConnectionAdmin(ReadOnlyAdmin):
    last_synced = instant_column("last_synced_at", "last synced")
    retry_after_ = instant_column("retry_after", "retry after")
    token_expires = instant_column("token_expires_at", "token expires")
    created = instant_column("created_at", "created")
    push_expires = instant_column("push_expires_at", "push expires")
    list_display = (
        "id",
        "user",
        "provider",
        "account",
        "status",
        "last_synced",
        "last_error_short",
        "retry_after_",
        "resync_requested",
        "push",
    )
    list_filter = ("provider", "status", "resync_requested", "push_state")
    list_select_related = ("user",)
    search_fields = ("account", "user__username", "user__email")
    # An allow-list (the console filters only on what a list offers): a new column stays
    # hidden, secrets and push identifiers among them, until someone decides it is safe.
    fields = (
        "user",
        "provider",
        "account",
        "calendar_id",
        "status",
        "last_synced",
        "last_error",
        "retry_after_",
        "token_expires",
        "allow_private_network",
        "resync_requested",
        "push",
        "push_expires",
        "push_error",
        "created",
    )
    readonly_fields = fields
    actions = ("resync_now",)

    # Resync is a change to the connection, so it takes the change permission.
    has_resync_permission = ReadOnlyAdmin.may_change

    @admin.display(description="push")
    def push(self, obj: CalendarConnection) -> str:
        """Whether the provider tells us about changes, or the calendar is polled, and why."""
        if obj.provider not in PUSH_PROVIDERS:
            polled = {"ics": "polled (conditional GET)", "caldav": "polled (sync-collection)"}
            return polled.get(obj.provider, "—")
        if obj.push_state == PushState.LIVE and not push_live(
            obj, timezone.now(), NudgeConfig.from_settings()
        ):
            return "polled: push lapsed (expired or not configured)"
        return obj.get_push_state_display()

    @admin.display(description="last error")
    def last_error_short(self, obj: CalendarConnection) -> str:
        return Truncator(obj.last_error).chars(80)

    @admin.action(permissions=["resync"], description="Resync now (on the next materialize run)")
    def resync_now(self, request: HttpRequest, queryset: QuerySet[CalendarConnection]) -> None:
        fields = ("pk", "provider", "account", "user_id", "status", "retry_after")
        connections = list(queryset.only(*fields))
        queryset.update(resync_requested=True)
        for connection in connections:
            self.log_change(request, connection, "Resync requested by support.")
        now = timezone.now()
        later = [(c, why) for c in connections if (why := _not_on_next_run(c, now))]
        if len(connections) > len(later):
            self.message_user(
                request,
                f"{len(connections) - len(later)} connection(s) will sync on the next "
                "materialize run.",
                messages.SUCCESS,
            )
        if later:
            self.message_user(
                request,
                "Not synced on the next run: " + "; ".join(f"#{c.pk} {why}" for c, why in later),
                messages.WARNING,
            )


def _not_on_next_run(connection: CalendarConnection, now: datetime) -> str:
    """Why materialize's next run will not fetch ``connection`` whatever the flag says
    (``calendars.sync.held_back``; local events are never synced); "" when it will."""
    if connection.provider == Provider.LOCAL:
        return "holds local events: there is nothing to sync"
    held = held_back(connection, now)
    if held is None:
        return ""
    if held.outcome == Outcome.SKIPPED_REAUTH:
        return "needs its user to re-authorise it"
    return f"is backing off until {when_text(connection.retry_after, seconds=False)}"


@admin.register(CalendarEvent)
class CalendarEventAdmin(ReadOnlyAdmin):
    starts = instant_column("starts_at", "starts")
    ends = instant_column("ends_at", "ends")
    occurrence = instant_column("occurrence_start", "occurrence start")
    updated = instant_column("updated_at", "updated")
    list_display = ("id", "title", "user", "starts", "all_day", "status", "declined")
    list_filter = ("status", "all_day", "declined", ("starts_at", admin.DateFieldListFilter))
    list_select_related = ("user",)
    search_fields = ("title", "user__username", "user__email", "=provider_event_id")
    date_hierarchy = "starts_at"
    ordering = ("-starts_at",)
    fields = (
        "user",
        "connection",
        "title",
        "provider_event_id",
        "occurrence",
        "starts",
        "ends",
        "all_day",
        "status",
        "declined",
        "reminder_minutes",
        "updated",
    )
    readonly_fields = fields
