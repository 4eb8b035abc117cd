"""The queue (``scheduled_sends``), per-user delivery settings, and the sweep run log."""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, timedelta

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Now, TruncMinute

from core.config import NudgeConfig
from scheduled_sends.queue.states import Outcome, ScheduledSendQuerySet
from tenancy.models import TenantModel

# [0-9], not \d: \d also matches Arabic-Indic and fullwidth digits.
E164 = re.compile(r"\+[1-9][0-9]{6,14}")
MAX_LEAD_MINUTES = 24 * 60


def validate_e164(value: str) -> None:
    if value and not E164.fullmatch(value):
        raise ValidationError(
            "Enter the number in E.164 form: a '+', the country code and the number, "
            "digits only (e.g. +14155550100)."
        )


def validate_timezone(value: str) -> None:
    # The IANA names, not whatever ZoneInfo opens: it also reads "posix/…" and
    # "right/…" files, which are zone files, not names a user would recognise.
    if value not in zoneinfo.available_timezones():
        raise ValidationError(
            f"{value!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York)."
        )


LEAD_RANGE = f"The lead must be between 0 and {MAX_LEAD_MINUTES} minutes (24 hours)."


def validate_lead_minutes(value: int) -> None:
    if not 0 <= value <= MAX_LEAD_MINUTES:
        raise ValidationError(f"{LEAD_RANGE} {value} is outside that.")


def validate_telegram_chat_id(value: str) -> None:
    if value and not re.fullmatch(r"-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31}", value):
        raise ValidationError("A Telegram chat id is a number (or @channelusername).")


class Kind(models.TextChoices):
    EVENT = "event", "Calendar event"
    FOLLOW_UP = "follow_up", "Follow-up"


class Channel(models.TextChoices):
    WHATSAPP = "whatsapp", "WhatsApp"
    TELEGRAM = "telegram", "Telegram"
    CONSOLE = "console", "Console (development)"


class ScheduledSend(TenantModel):
    """One nudge: this subject, for this user, at this instant.

    ``claimed_at`` is not ``sent_at``: a claim is a lease a deliver run holds
    while it sends, and it expires; ``sent_at`` is stamped only after a
    successful send or a deliberate skip, never before and never on failure.
    ``intended_at`` is when the nudge is meant to arrive; ``fire_at`` is when
    it is sent, which burst smoothing may move earlier, never later. The
    unique key ``(user_id, kind, ref_id, intended_at)`` makes materialising
    the same window twice queue one nudge, however the send time moved. The
    claim stands on a partial index over unsettled rows in the order
    ``(fire_minute, user_rank, fire_at)``; ``fire_minute`` is ``fire_at``
    truncated to the UTC minute, a column PostgreSQL generates so no writer
    can let it drift. States and transitions: ``scheduled_sends/queue/``.
    """

    kind = models.CharField(max_length=16, choices=Kind.choices)
    ref_id = models.BigIntegerField(help_text="The subject's id: a calendar event or follow-up.")
    intended_at = models.DateTimeField(
        help_text="When the nudge is meant to arrive (subject start - lead); "
        "fire_at may be earlier to smooth a burst, never later."
    )
    fire_at = models.DateTimeField()
    fire_minute = models.GeneratedField(
        expression=TruncMinute("fire_at", tzinfo=UTC),
        output_field=models.DateTimeField(),
        db_persist=True,
        help_text="fire_at's minute (UTC): leads the claim's index, so one minute is one range.",
    )
    user_rank = models.PositiveSmallIntegerField(
        db_default=0,
        help_text="Rank among this user's nudges of the same minute: "
        "everyone's first goes before anyone's second.",
    )
    subject_starts_at = models.DateTimeField(
        help_text="When the subject starts, as materialised; a different start means it moved."
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    send_started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set just before the provider is called; a claim that finds it set "
        "belongs to a run that died mid-send.",
    )
    sent_at = models.DateTimeField(null=True, blank=True)
    # NULL, not "", means pending: the claim's partial index is ``WHERE outcome IS NULL``.
    outcome = models.CharField(  # noqa: DJ001
        max_length=16, choices=Outcome.choices, null=True, blank=True
    )
    attempts = models.PositiveIntegerField(db_default=0)
    not_before = models.DateTimeField(
        null=True, blank=True, help_text="A provider's rate limit asked us to wait until then."
    )
    last_error = models.TextField(blank=True, db_default="")
    channel = models.CharField(max_length=16, choices=Channel.choices, blank=True, db_default="")
    provider_message_id = models.CharField(max_length=128, blank=True, db_default="")
    delivery_status = models.CharField(
        max_length=32, blank=True, db_default="", help_text="The provider's later receipt."
    )
    delivery_error_code = models.CharField(max_length=32, blank=True, db_default="")
    delivery_updated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    objects = ScheduledSendQuerySet.as_manager()

    class Meta:
        db_table = "scheduled_sends"
        constraints = [
            # sent_at is set exactly when the outcome is one that counts as done.
            models.CheckConstraint(
                name="scheduled_sends_sent_at_matches_outcome",
                condition=(
                    models.Q(sent_at__isnull=True, outcome__isnull=True)
                    | models.Q(sent_at__isnull=True, outcome__in=["failed", "expired"])
                    | models.Q(sent_at__isnull=False, outcome__in=["sent", "skipped"])
                ),
            ),
            models.UniqueConstraint(
                fields=("user", "kind", "ref_id", "intended_at"),
                name="scheduled_sends_nudge_uniq",
            ),
            models.CheckConstraint(
                condition=models.Q(fire_at__lte=models.F("intended_at")),
                name="scheduled_sends_never_later_than_intended",
            ),
        ]
        # The table's fillfactor (50: room on each page for the claim's
        # heap-only updates) is set by migration 0005; Django cannot say it.
        indexes = [
            # The claim: oldest minute first, everyone's first nudge of a minute
            # before anyone's second, over unsettled rows only, so its size
            # follows the live work and the plan stops after LIMIT rows.
            models.Index(
                fields=["fire_minute", "user_rank", "fire_at"],
                condition=models.Q(sent_at__isnull=True) & models.Q(outcome__isnull=True),
                name="scheduled_sends_due_idx",
            ),
            # Retention and the console's history charts: settled rows by time.
            models.Index(
                fields=["fire_at"],
                condition=models.Q(outcome__isnull=False),
                name="scheduled_sends_settled_idx",
            ),
            # A delivery receipt names only the provider's message id.
            models.Index(
                fields=["provider_message_id"],
                condition=~models.Q(provider_message_id=""),
                name="sends_provider_message_idx",
            ),
            # Materialise's read of one user's pending rows. Without it the planner,
            # short of statistics on a freshly filled queue, walks the claim's index
            # through every tenant's live rows for each user.
            models.Index(
                fields=["user", "intended_at"],
                condition=models.Q(sent_at__isnull=True, outcome__isnull=True),
                name="sends_user_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.ref_id} at {self.intended_at:%Y-%m-%d %H:%M}Z"

    @property
    def lateness(self) -> timedelta | None:
        """How late it arrived (negative: early); None until sent."""
        if self.outcome != Outcome.SENT or self.sent_at is None:
            return None
        return self.sent_at - self.intended_at


def default_lead_minutes() -> int:
    """A new user's lead: NUDGE_DEFAULT_LEAD_MINUTES, read when the row is made."""
    return int(NudgeConfig.from_settings().default_lead.total_seconds() // 60)


class DeliverySettings(TenantModel):
    """Where and how one user's nudges go."""

    user = models.OneToOneField(
        "auth.User", on_delete=models.CASCADE, related_name="delivery_settings"
    )
    enabled = models.BooleanField(default=True)
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.CONSOLE)
    whatsapp_number = models.CharField(
        max_length=16, blank=True, default="", validators=[validate_e164]
    )
    telegram_chat_id = models.CharField(
        max_length=64, blank=True, default="", validators=[validate_telegram_chat_id]
    )
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_timezone])
    default_lead_minutes = models.PositiveIntegerField(
        default=default_lead_minutes,
        validators=[validate_lead_minutes],
    )
    capped_nudges = models.PositiveIntegerField(
        db_default=0,
        help_text="Nudges the last materialise run left out: more than the per-user limits "
        "allow in one minute or one look-ahead (NUDGE_MAX_NUDGES_PER_USER…).",
    )
    capped_at = models.DateTimeField(
        null=True, blank=True, help_text="When the per-user limits last left nudges out."
    )
    # Self-service (the end-user area): a pause the user can read the reason of,
    # quiet hours in their zone, a channel found unreachable, and WhatsApp opt-in.
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
    whatsapp_opted_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "delivery_settings"
        verbose_name_plural = "delivery settings"
        constraints = [
            models.CheckConstraint(
                name="delivery_settings_lead_in_range",
                condition=models.Q(default_lead_minutes__gte=0)
                & models.Q(default_lead_minutes__lte=MAX_LEAD_MINUTES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} for user {self.user_id}"

    def clean(self) -> None:
        if self.channel == Channel.WHATSAPP and not self.whatsapp_number:
            raise ValidationError({"whatsapp_number": "WhatsApp delivery needs a number."})
        if self.channel == Channel.TELEGRAM and not self.telegram_chat_id:
            raise ValidationError({"telegram_chat_id": "Telegram delivery needs a chat id."})

    def address(self) -> str:
        """The recipient address for the configured channel."""
        if self.channel == Channel.WHATSAPP:
            return self.whatsapp_number
        if self.channel == Channel.TELEGRAM:
            return self.telegram_chat_id
        return f"user:{self.user_id}"


class ChannelPacing(models.Model):
    """One channel's next free send slot, shared by every deliver process.

    Not a tenant table: it holds a channel name and an instant, no user data.
    See ``scheduled_sends/pacing.py``.
    """

    channel = models.CharField(max_length=16, primary_key=True)
    next_slot_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "channel_pacing"

    def __str__(self) -> str:
        return f"{self.channel}: next slot {self.next_slot_at:%H:%M:%S.%f}"


class SweepRun(models.Model):
    """One run of a sweep. Not a tenant table: it holds counts, never user data.

    A quiet minute and an outage must not look the same; this log, read by
    ``nudge_health``, is how they are told apart.
    """

    class Sweep(models.TextChoices):
        MATERIALIZE = "materialize"
        DELIVER = "deliver"

    class Status(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        FAILED = "failed"

    sweep = models.CharField(max_length=16, choices=Sweep.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    as_of = models.DateTimeField(help_text="The instant the run acted for (--now, or the clock).")
    counts = models.JSONField(default=dict)
    error = models.TextField(blank=True, default="")
    summary = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        db_table = "sweep_runs"
        indexes = [models.Index(fields=["sweep", "-as_of"], name="sweep_runs_recent_idx")]

    def __str__(self) -> str:
        return f"{self.sweep} {self.status} at {self.started_at:%Y-%m-%d %H:%M:%S}"
