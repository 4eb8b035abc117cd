"""A user's delivery settings as support edits them: channel, address, zone, lead; saved
through ``accounts.actions.update_settings``, so it re-queues the user like their own edit."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.actions import EDITABLE, update_settings
from accounts.models import LEAD_RANGE, DeliverySettings
from accounts.rules import pause_reason
from core.config import SCHEMA_MAX_LEAD_MINUTES
from core.display import instant_column


class DeliverySettingsForm(forms.ModelForm):
    # Longer than the column, so a number typed with spaces gets the model's
    # E.164 explanation rather than only "at most 16 characters".
    whatsapp_number = forms.CharField(
        label="WhatsApp number",
        max_length=64,
        required=False,
        help_text="E.164: '+', country code, number, digits only (e.g. +14155550100).",
    )

    class Meta:
        model = DeliverySettings
        fields = (
            "user",
            "enabled",
            "channel",
            "whatsapp_number",
            "telegram_chat_id",
            "timezone",
            "default_lead_minutes",
        )
        labels = {"default_lead_minutes": "Default lead (minutes)"}
        # The number field's own bound (a positive integer) words it the model's way.
        error_messages = {"default_lead_minutes": {"min_value": LEAD_RANGE}}
        help_texts = {
            "telegram_chat_id": "A numeric chat id, or @channelusername.",
            "timezone": "An IANA time zone name, e.g. Europe/Berlin.",
            "default_lead_minutes": "How long before the event the nudge goes: "
            f"0 to {SCHEMA_MAX_LEAD_MINUTES} minutes.",
        }

    ADDRESSES = ("whatsapp_number", "telegram_chat_id")
    NO_NEW_ADDRESS = (
        "Support can clear an address but not set or change one: the user links it "
        "themselves from their Settings page, which records their consent."
    )

    def _post_clean(self) -> None:
        """An address may stay or be cleared, never set: only the user's confirmation links
        one. Runs after the model's validation, so a malformed value is explained as such."""
        super()._post_clean()
        for name in self.ADDRESSES:
            value = self.cleaned_data.get(name)
            if name not in self.errors and value and value != (self.initial.get(name) or ""):
                self.add_error(name, self.NO_NEW_ADDRESS)


@admin.register(DeliverySettings)
class DeliverySettingsAdmin(admin.ModelAdmin):
    form = DeliverySettingsForm
    list_display = (
        "user",
        "enabled",
        "channel",
        "timezone",
        "default_lead_minutes",
        "capped_nudges",
        "activity",
        "held_because",
    )
    list_filter = ("enabled", "channel", "paused", "unreachable_channel")
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    raw_id_fields = ("user",)
    # Written by materialize: how many nudges the per-user limits left out.
    CAP_FIELDS = ("capped_nudges", "capped_at_")
    capped_at_ = instant_column("capped_at", "capped at")
    # Set by the user (end-user area), their messages, or a provider: shown, not edited here.
    SELF_SERVICE = (
        "held_because",
        "quiet_start",
        "quiet_end",
        "unreachable_at_",
        "whatsapp_opted_in_at_",
    )
    unreachable_at_ = instant_column("unreachable_at", "unreachable since")
    whatsapp_opted_in_at_ = instant_column("whatsapp_opted_in_at", "WhatsApp opted in at")

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> tuple[str, ...]:
        if obj is None:
            return self.CAP_FIELDS
        return ("user", *self.CAP_FIELDS, *self.SELF_SERVICE)

    @admin.display(description="held because")
    def held_because(self, obj: DeliverySettings) -> str:
        held = pause_reason(obj)
        return held.reason if held else ""

    @admin.display(description="nudges")
    def activity(self, obj: DeliverySettings) -> str:
        """The user's charts: look-ahead, lateness and outcomes of their nudges."""
        url = reverse("admin:nudge_user_activity", args=[obj.user_id])
        return format_html('<a href="{}">charts</a>', url)

    def save_model(self, request: HttpRequest, obj: DeliverySettings, form, change: bool) -> None:
        """The one write action, not ``obj.save()``: support's edit re-queues like the user's."""
        changes = {name: form.cleaned_data[name] for name in form.changed_data if name in EDITABLE}
        saved = update_settings(obj.user_id, changes, timezone.now())
        obj.pk = saved.pk
