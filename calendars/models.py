"""Connected calendars and a local copy of their events, so "what does this user
have in ten minutes" is an indexed read, not a provider round trip."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Least
from django.utils.translation import gettext_lazy as _

from tenancy.models import TenantModel


class Provider(models.TextChoices):
    GOOGLE = "google", "Google Calendar"
    MICROSOFT = "microsoft", "Microsoft 365"
    ICS = "ics", _("ICS feed")
    CALDAV = "caldav", "CalDAV"
    # Events written locally (demo data, imports): nothing to sync.
    LOCAL = "local", _("Local events (not synced)")


class ConnectionStatus(models.TextChoices):
    ACTIVE = "active", _("Active")
    NEEDS_REAUTH = "needs_reauth", _("Needs re-authorisation")
    ERROR = "error", _("Last sync failed")


class PushState(models.TextChoices):
    """Anything but LIVE (with an expiry ahead) means the calendar is polled every cycle."""

    NONE = "", "Polled (no push)"
    LIVE = "live", "Push live"
    FAILED = "failed", "Polled: push could not be set up"
    LAPSED = "lapsed", "Polled: push lapsed or was removed"


class CalendarConnection(TenantModel):
    """A user's connected calendar account. Tokens are encrypted at rest."""

    provider = models.CharField(max_length=16, choices=Provider.choices)
    account = models.CharField(max_length=255, blank=True, default="")
    calendar_id = models.CharField(max_length=255, blank=True, default="primary")
    # Encrypted with providers.crypto; never shown in the admin or in errors.
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
    # Push: the Google channel or Graph subscription id, Google's resource id, and a
    # digest of the secret the provider echoes back.
    push_state = models.CharField(
        max_length=8, choices=PushState.choices, default=PushState.NONE, blank=True
    )
    push_channel_id = models.CharField(max_length=255, blank=True, default="")
    push_resource_id = models.CharField(max_length=255, blank=True, default="")
    push_secret_digest = models.CharField(max_length=64, blank=True, default="")
    push_expires_at = models.DateTimeField(null=True, blank=True)
    # Google numbers a channel's messages increasingly: a number not above this is a replay.
    push_message_number = models.BigIntegerField(default=0)
    # Graph asked to re-authorise the subscription expiring then; cleared by a renewal.
    push_reauthorize_expiry = models.DateTimeField(null=True, blank=True)
    push_error = models.CharField(max_length=255, blank=True, default="")
    # A channel being made: recorded before the provider is asked, so a notification
    # arriving before the provider's answer is stored is still believed (Google's
    # channel id; Graph's is not known yet, so only the secret's digest names it).
    push_pending_channel_id = models.CharField(max_length=255, blank=True, default="")
    push_pending_digest = models.CharField(max_length=64, blank=True, default="")
    # The user's choices for this calendar (the Calendars page).
    nudges_on = models.BooleanField(default=True, help_text="Nudge this calendar's events.")
    skip_all_day = models.BooleanField(
        default=True, help_text="Leave all-day events out (they are nudged at midnight)."
    )

    class Meta:
        db_table = "calendar_connections"
        indexes = [models.Index(fields=["user"], name="calendar_connections_user_idx")]

    @property
    def calendar_name(self) -> str:
        """A CalDAV calendar's name, as discovery found it: one account's calendars share
        its user name, so this tells them apart. Empty for the others."""
        if self.provider != Provider.CALDAV or not isinstance(self.sync_state, dict):
            return ""
        return str(self.sync_state.get("name") or "")

    def __str__(self) -> str:
        label = f"{self.get_provider_display()} {self.account or self.pk}"
        return f"{label} — {self.calendar_name}" if self.calendar_name else label


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
    # A recurring series' instance's RECURRENCE-ID; null for a single event. Part of the key.
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
    location = models.CharField(
        max_length=512, blank=True, default="", help_text="Where, as the calendar says it."
    )
    join_url = models.CharField(
        max_length=2048,
        blank=True,
        default="",
        help_text="An https link to a known meeting host, or empty (never an arbitrary link).",
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


class ProviderRelease(TenantModel):
    """What a disconnected calendar leaves at its provider to undo (its push channel,
    and at Google its grant); the minute job undoes it and deletes the row."""

    connection_id = models.BigIntegerField(unique=True)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    account = models.CharField(max_length=255, blank=True, default="")
    access_token_encrypted = models.TextField(blank=True, default="")
    refresh_token_encrypted = models.TextField(blank=True, default="")
    token_expires_at = models.DateTimeField(null=True, blank=True)
    push_channel_id = models.CharField(max_length=255, blank=True, default="")
    push_resource_id = models.CharField(max_length=255, blank=True, default="")
    requested_at = models.DateTimeField()

    class Meta:
        db_table = "calendar_releases"
        indexes = [models.Index(fields=["user"], name="calendar_releases_user_idx")]

    def __str__(self) -> str:
        return f"release of disconnected connection {self.connection_id}"


class ReleaseWork(models.Model):
    """The minute job's releases to do across users: ids and an instant only, so not a
    tenant table. ``due_at`` moves ahead while a job holds the row."""

    connection_id = models.BigIntegerField(primary_key=True)
    user_id = models.BigIntegerField()
    due_at = models.DateTimeField()

    class Meta:
        db_table = "calendar_release_work"
        indexes = [models.Index(fields=["due_at"], name="release_work_due_idx")]

    def __str__(self) -> str:
        return f"release work for connection {self.connection_id}"


class PushWork(models.Model):
    """The minute job's to-do list: connections to fetch, and push channels to create or
    renew by when. Ids and instants only, so not a tenant table (no bypass needed).
    ``polling`` mirrors "push is not live" for health's count among ``push_capable``."""

    connection_id = models.BigIntegerField(primary_key=True)
    user_id = models.BigIntegerField()
    # Set by a verified notification; a flood leaves one row, so one sync.
    changed_at = models.DateTimeField(null=True, blank=True)
    # The mark a minute job took, held until ``change_held_until`` (``worklist``).
    taken_change_at = models.DateTimeField(null=True, blank=True)
    change_held_until = models.DateTimeField(null=True, blank=True)
    # When the channel must be created, renewed or retried.
    maintain_at = models.DateTimeField(null=True, blank=True)
    polling = models.BooleanField(default=True)
    push_capable = models.BooleanField(default=True)

    class Meta:
        db_table = "calendar_push_work"
        indexes = [
            models.Index(
                fields=["changed_at"],
                name="push_work_changed_idx",
                condition=models.Q(changed_at__isnull=False),
            ),
            models.Index(fields=["maintain_at"], name="push_work_maintain_idx"),
            models.Index(
                Least("changed_at", "taken_change_at"),
                name="push_work_change_order_idx",
                condition=models.Q(changed_at__isnull=False)
                | models.Q(taken_change_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"push work for connection {self.connection_id}"
