"""A person's delivery state: where and how their nudges go, and why they are held;
written only through ``accounts.actions``."""

from __future__ import annotations

import re
import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from core.config import SCHEMA_MAX_LEAD_MINUTES, NudgeConfig
from tenancy.models import TenantModel

# [0-9], not \d: \d also matches Arabic-Indic and fullwidth digits.
E164 = re.compile(r"\+[1-9][0-9]{6,14}")


def validate_e164(value: str) -> None:
    if value and not E164.fullmatch(value):
        raise ValidationError(
            "Enter the number in E.164 form: a '+', the country code and the number, "
            "digits only (e.g. +14155550100)."
        )


def validate_timezone(value: str) -> None:
    # The IANA names, not whatever ZoneInfo opens (it also reads "posix/…" files).
    if value not in zoneinfo.available_timezones():
        raise ValidationError(
            f"{value!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York)."
        )


LEAD_RANGE = f"The lead must be between 0 and {SCHEMA_MAX_LEAD_MINUTES} minutes (24 hours)."


def validate_lead_minutes(value: int) -> None:
    if not 0 <= value <= SCHEMA_MAX_LEAD_MINUTES:
        raise ValidationError(f"{LEAD_RANGE} {value} is outside that.")


def validate_telegram_chat_id(value: str) -> None:
    if value and not re.fullmatch(r"-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31}", value):
        raise ValidationError("A Telegram chat id is a number (or @channelusername).")


class Channel(models.TextChoices):
    WHATSAPP = "whatsapp", "WhatsApp"
    TELEGRAM = "telegram", "Telegram"
    CONSOLE = "console", "Console (development)"


class Clock(models.TextChoices):
    """How times are written to the user: 15:00 or 3:00 PM."""

    H24 = "24h", "24-hour (15:00)"
    H12 = "12h", "12-hour (3:00 PM)"


def default_lead_minutes() -> int:
    """A new user's lead: NUDGE_DEFAULT_LEAD_MINUTES, read when the row is made."""
    return int(NudgeConfig.from_settings().default_lead.total_seconds() // 60)


class DeliverySettings(TenantModel):
    """Where and how one user's nudges go."""

    user = models.OneToOneField(
        "auth.User", on_delete=models.CASCADE, related_name="delivery_settings"
    )
    enabled = models.BooleanField(default=True)
    # Blank until the user links a channel: nothing is planned for them before that.
    channel = models.CharField(max_length=16, choices=Channel.choices, blank=True, default="")
    whatsapp_number = models.CharField(
        "WhatsApp number", max_length=16, blank=True, default="", validators=[validate_e164]
    )
    telegram_chat_id = models.CharField(
        max_length=64, blank=True, default="", validators=[validate_telegram_chat_id]
    )
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_timezone])
    # Set from the browser's Accept-Language when the row is made in the user area.
    language = models.CharField(max_length=8, choices=settings.LANGUAGES, default="en")
    clock = models.CharField(max_length=3, choices=Clock.choices, default=Clock.H24)
    default_lead_minutes = models.PositiveIntegerField(
        default=default_lead_minutes,
        validators=[validate_lead_minutes],
    )
    capped_nudges = models.PositiveIntegerField(
        # Both: the database's for rows written in SQL, Python's for a new instance.
        default=0,
        db_default=0,
        help_text="Nudges the last materialize run left out: more than the per-user limits "
        "allow in one minute or one look-ahead (NUDGE_MAX_NUDGES_PER_USER…).",
    )
    capped_at = models.DateTimeField(
        null=True, blank=True, help_text="When the per-user limits last left nudges out."
    )
    # Self-service: pause, quiet hours (user's zone), unreachable channel, WhatsApp opt-in.
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=200, blank=True, default="")
    paused_at = models.DateTimeField(null=True, blank=True)
    quiet_start = models.TimeField(
        null=True, blank=True, help_text="Local time; none = no quiet hours."
    )
    quiet_end = models.TimeField(null=True, blank=True)
    unreachable_channel = models.CharField(
        max_length=16,
        choices=Channel.choices,
        blank=True,
        default="",
        help_text="The provider said this user cannot be reached here; cleared by relinking.",
    )
    unreachable_reason = models.CharField(max_length=200, blank=True, default="")
    unreachable_at = models.DateTimeField(null=True, blank=True)
    whatsapp_opted_in_at = models.DateTimeField("WhatsApp opted in at", null=True, blank=True)
    agenda_at = models.TimeField(
        "agenda time",
        null=True,
        blank=True,
        help_text="Local time of the daily agenda (the day's events and follow-ups); none = off.",
    )

    class Meta:
        db_table = "delivery_settings"
        verbose_name_plural = "delivery settings"
        constraints = [
            models.CheckConstraint(
                name="delivery_settings_lead_in_range",
                condition=models.Q(default_lead_minutes__gte=0)
                & models.Q(default_lead_minutes__lte=SCHEMA_MAX_LEAD_MINUTES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} for user {self.user_id}"

    def clean(self) -> None:
        if self.channel == Channel.WHATSAPP and not self.whatsapp_number:
            raise ValidationError({"whatsapp_number": "WhatsApp delivery needs a number."})
        if self.channel == Channel.TELEGRAM and not self.telegram_chat_id:
            raise ValidationError({"telegram_chat_id": "Telegram delivery needs a chat id."})

    def address(self, channel: str | None = None) -> str:
        """The chat or number linked for ``channel`` (by default the channel in use), in use
        or not; the development console's is the user."""
        channel = channel or self.channel
        if channel == Channel.WHATSAPP:
            return self.whatsapp_number
        if channel == Channel.TELEGRAM:
            return self.telegram_chat_id
        return f"user:{self.user_id}"


class AccountNotice(TenantModel):
    """Something done to a user's account not by them on the website, shown on Settings."""

    text = models.CharField(max_length=300)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "portal_account_notices"
        indexes = [models.Index(fields=["user", "-created_at"], name="portal_notices_user_idx")]

    def __str__(self) -> str:
        return f"notice for user {self.user_id} at {self.created_at:%Y-%m-%d %H:%M}Z"
