"""The queue as support reads it: problems first, each row's state in words.

The change form is read-only (a full-row save could overwrite a deliver run's
claim); rows change only through ``actions``, which call the queue's transitions.
"""

from __future__ import annotations

import re

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.db.models import Case, IntegerField, QuerySet, When
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from console.admin import actions
from console.admin.rows import as_of, attach_subject_titles, subject_label
from core.admin_readonly import ReadOnlyAdmin
from core.config import NudgeConfig
from core.display import instant_column, when
from core.zones import known_zone
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import states


class StateFilter(admin.SimpleListFilter):
    """The derived states (``queue/states.py``) as filters."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return states.State.choices

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in states.State.values:
            lease = NudgeConfig.from_settings().lease
            return queryset.filter(states.in_state(self.value(), as_of(request), lease))
        return queryset


class DueFilter(admin.SimpleListFilter):
    """Rows health counts as overdue and unclaimed: its sentence links to exactly these."""

    title = "due"
    parameter_name = "due"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> tuple:
        return (("overdue", "Overdue, unclaimed"),)

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "overdue":
            config = NudgeConfig.from_settings()
            return queryset.filter(
                states.overdue_unclaimed(as_of(request), config.grace, config.overdue_after)
            )
        return queryset


# A user id as the console's links write it (``isdigit`` also takes "²", which int refuses).
_USER_ID = re.compile(r"[0-9]{1,19}")


class OwnerFilter(admin.SimpleListFilter):
    """One user's rows, by id: where a user's charts page sends support.

    Offered only once chosen (listing every user would not fit a sidebar); the
    search box finds a user by name.
    """

    title = "owner"
    parameter_name = "owner"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        value = self.value()
        if not (value and _USER_ID.fullmatch(value)):
            return []  # not an id: the console's guard refuses it
        names = get_user_model().objects.filter(pk=int(value)).values_list("username", flat=True)
        return [(value, next(iter(names), f"user #{value}"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value and _USER_ID.fullmatch(value):
            return queryset.filter(user_id=int(value))
        return queryset


def _channel_for_unsent(obj: ScheduledSend) -> str:
    """The user's channel now, for a row not yet sent; the queued one noted when it differs."""
    settings = getattr(obj.user, "delivery_settings", None)
    if not (settings and settings.channel):
        return "no channel chosen yet"
    if obj.channel and obj.channel != settings.channel:
        return f"{settings.get_channel_display()} (now; queued for {obj.get_channel_display()})"
    return settings.get_channel_display()


@admin.register(ScheduledSend)
class ScheduledSendAdmin(ReadOnlyAdmin):
    # Eight columns fit beside the filters at 1280 px (both zones of "fires" share a
    # cell); state and what went wrong lead, since a phone scrolls the rest away.
    list_display = (
        "id",
        "state_label",
        "attempts_label",
        "last_error_short",
        "delivery",
        "fires",
        "owner",
        "subject_with_kind",
    )
    list_display_links = ("id",)
    list_filter = (
        StateFilter,
        DueFilter,
        OwnerFilter,
        "kind",
        "channel",
        "failure_kind",
        ("fire_at", admin.DateFieldListFilter),
    )
    search_fields = ("user__username", "user__email", "=provider_message_id")
    search_help_text = "Username or e-mail (partial), or a provider message id (exact)."
    date_hierarchy = "fire_at"
    list_per_page = 50
    actions = (actions.release_claim, actions.retry_now, actions.skip)
    fields = (
        "owner",
        "kind",
        "ref_id",
        "subject",
        "state_label",
        "fire_at_utc",
        "fire_at_local",
        "subject_starts_at_",
        "claimed_at_",
        "claim_token",
        "send_started_at_",
        "sent_at_",
        "outcome",
        "attempts_label",
        "not_before_",
        "failure_kind",
        "last_error",
        "channel",
        "provider_message_id",
        "delivery_status",
        "delivery_error_code",
        "delivery_updated_at_",
        "created_at_",
    )
    readonly_fields = fields

    fire_at_utc = instant_column("fire_at", "fires")
    subject_starts_at_ = instant_column("subject_starts_at", "subject starts")
    claimed_at_ = instant_column("claimed_at", "claimed at")
    send_started_at_ = instant_column("send_started_at", "send started at")
    sent_at_ = instant_column("sent_at", "sent at")
    not_before_ = instant_column("not_before", "not before")
    delivery_updated_at_ = instant_column("delivery_updated_at", "receipt updated at")
    created_at_ = instant_column("created_at", "created at")

    # Rows come from materialize only, and a deleted one would be materialized again
    # (skip it instead): the actions are the only writes, and they take "change".
    has_support_permission = ReadOnlyAdmin.may_change

    def get_queryset(self, request: HttpRequest) -> QuerySet[ScheduledSend]:
        """Every row with its state (``queue_state``), problems first."""
        now, lease = as_of(request), NudgeConfig.from_settings().lease
        problem = When(queue_state__in=states.PROBLEM_STATES, then=0)
        # Not super(): it would order by problem_rank before that annotation exists.
        return (
            self.model._default_manager.select_related("user", "user__delivery_settings")
            .with_state(now, lease)
            .annotate(problem_rank=Case(problem, default=1, output_field=IntegerField()))
            .order_by(*self.get_ordering(request))
        )

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return ("problem_rank", "-fire_at")

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        attach_subject_titles(changelist.result_list)
        return changelist

    def get_object(self, request: HttpRequest, object_id: str, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            attach_subject_titles([obj])
        return obj

    @admin.display(description="owner", ordering="user__username")
    def owner(self, obj: ScheduledSend) -> str:
        url = reverse("admin:nudge_user_activity", args=[obj.user_id])
        return format_html(
            '<a href="{}" title="this user\'s charts">{}</a>', url, obj.user.username
        )

    @admin.display(description="subject")
    def subject(self, obj: ScheduledSend) -> str:
        return subject_label(obj)

    @admin.display(description="subject")
    def subject_with_kind(self, obj: ScheduledSend) -> str:
        if getattr(obj, "subject_title", None) is None:
            return subject_label(obj)
        return f"{obj.get_kind_display()}: {subject_label(obj)}"

    @admin.display(description="delivery")
    def delivery(self, obj: ScheduledSend) -> str:
        """Channel, the provider's receipt and its message id, as far as known. An unsent
        row shows the user's channel now: deliver re-reads it when it sends."""
        channel = obj.get_channel_display()
        if obj.outcome is None:
            channel = _channel_for_unsent(obj)
        parts = [channel, obj.delivery_status, obj.provider_message_id]
        return " · ".join(part for part in parts if part) or "-"

    @admin.display(description="tries")
    def attempts_label(self, obj: ScheduledSend) -> str:
        """Sends tried: ``attempts`` counts failed tries, so a sent row adds its success."""
        tries = obj.attempts + (1 if obj.outcome == states.Outcome.SENT else 0)
        return str(tries)

    @admin.display(description="fires (yours · user's zone)", ordering="fire_at")
    def fires(self, obj: ScheduledSend) -> str:
        return format_html(
            '{}<br><span class="nudge-user-zone">{}</span>',
            when(obj.fire_at),
            self.fire_at_local(obj),
        )

    @admin.display(description="fires (user's zone)", ordering="fire_at")
    def fire_at_local(self, obj: ScheduledSend) -> str:
        settings = getattr(obj.user, "delivery_settings", None)
        name = (settings.timezone if settings else "") or "UTC"
        zone = known_zone(name)
        if zone is None:
            return f"(unknown zone {name})"
        return f"{obj.fire_at.astimezone(zone):%Y-%m-%d %H:%M} {name}"

    @admin.display(description="state", ordering="problem_rank")
    def state_label(self, obj: ScheduledSend) -> str:
        return obj.queue_state

    @admin.display(description="last error")
    def last_error_short(self, obj: ScheduledSend) -> str:
        return Truncator(obj.last_error).chars(60)
