"""Connected calendars, their persisted events, and timed follow-ups.

Events are a local, incrementally synced copy so that "what does this user
have in ten minutes" is an indexed read, not a provider round trip.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from tenancy.models import TenantModel


class Provider(models.TextChoices):
    GOOGLE = "google", "Google Calendar"
    MICROSOFT = "microsoft", "Microsoft 365"
    ICS = "ics", "ICS feed"
    # Events written locally (demo data, imports): nothing to sync.
    LOCAL = "local", "Local events (not synced)"


class ConnectionStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    NEEDS_REAUTH = "needs_reauth", "Needs re-authorisation"
    ERROR = "error", "Last sync failed"


class CalendarConnection(TenantModel):
    """A user's connected calendar account. Tokens are encrypted at rest."""

    provider = models.CharField(max_length=16, choices=Provider.choices)
    account = models.CharField(max_length=255, blank=True, default="")
    calendar_id = models.CharField(max_length=255, blank=True, default="primary")
    # Encrypted with calendars.crypto; never shown in the admin or in errors.
    access_token_encrypted = models.TextField(blank=True, default="")
    refresh_token_encrypted = models.TextField(blank=True, default="")
    feed_url_encrypted = models.TextField(
        blank=True, default="", help_text="An ICS feed's secret address, encrypted."
    )
    token_expires_at = models.DateTimeField(null=True, blank=True)
    sync_state = models.JSONField(
        default=dict, blank=True, help_text="ETag / Last-Modified / sync tokens."
    )
    status = models.CharField(
        max_length=16, choices=ConnectionStatus.choices, default=ConnectionStatus.ACTIVE
    )
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    retry_after = models.DateTimeField(
        null=True, blank=True, help_text="Back off until then (429 / 5xx from the provider)."
    )
    resync_requested = models.BooleanField(default=False)
    allow_private_network = models.BooleanField(
        default=False,
        help_text="An ICS feed on a private or loopback address (connect_ics --allow-private).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "calendar_connections"
        indexes = [models.Index(fields=["user"], name="calendar_connections_user_idx")]

    def __str__(self) -> str:
        return f"{self.get_provider_display()} {self.account or self.pk}"


class EventStatus(models.TextChoices):
    CONFIRMED = "confirmed", "Confirmed"
    TENTATIVE = "tentative", "Tentative"
    CANCELLED = "cancelled", "Cancelled"


class CalendarEvent(TenantModel):
    """One occurrence of a calendar event, as last synced."""

    connection = models.ForeignKey(
        CalendarConnection, on_delete=models.CASCADE, related_name="events"
    )
    provider_event_id = models.CharField(max_length=512)
    # The occurrence's original start for a recurring series' instance
    # (RECURRENCE-ID); null for a single event. Part of the upsert key.
    occurrence_start = models.DateTimeField(null=True, blank=True)
    title = models.CharField(max_length=1024, blank=True, default="")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    all_day = models.BooleanField(default=False)
    status = models.CharField(
        max_length=16, choices=EventStatus.choices, default=EventStatus.CONFIRMED
    )
    declined = models.BooleanField(default=False, help_text="The user declined the invitation.")
    reminder_minutes = ArrayField(
        models.PositiveIntegerField(),
        default=list,
        blank=True,
        help_text="The event's own reminder lead times; empty means use the user's default.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "calendar_events"
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "provider_event_id", "occurrence_start"],
                name="calendar_events_occurrence_uniq",
                nulls_distinct=False,
            ),
        ]
        indexes = [
            models.Index(fields=["user", "starts_at"], name="calendar_events_user_start_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.title or '(untitled)'} at {self.starts_at:%Y-%m-%d %H:%M}Z"


class FollowUp(TenantModel):
    """Something the user gave a time to."""

    title = models.CharField(max_length=1024)
    due_at = models.DateTimeField()
    done = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "follow_ups"
        indexes = [
            # The missing index the old design began with: open follow-ups by due time.
            models.Index(
                fields=["user", "due_at"],
                name="follow_ups_open_due_idx",
                condition=models.Q(done=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} due {self.due_at:%Y-%m-%d %H:%M}Z"
