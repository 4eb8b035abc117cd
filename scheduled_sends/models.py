"""The queue (``scheduled_sends``), the user's acts on nudges, and the sweep run log."""

from __future__ import annotations

from datetime import UTC

from django.db import models
from django.db.models.functions import Now, TruncMinute

from accounts.models import Channel
from core.display import when_text
from scheduled_sends.failures import FailureKind
from scheduled_sends.queue.states import Outcome, ScheduledSendQuerySet
from tenancy.models import TenantModel


class Kind(models.TextChoices):
    EVENT = "event", "Calendar event"
    FOLLOW_UP = "follow_up", "Follow-up"
    # The day's list at the person's chosen time; ``ref_id`` is the local day (YYYYMMDD).
    AGENDA = "agenda", "Agenda"


class ScheduledSend(TenantModel):
    """One nudge: this subject, for this user, at this instant.

    ``claimed_at`` is an expiring lease; ``sent_at`` is stamped only after a
    successful send or a deliberate skip. The unique key on ``intended_at``
    makes materializing twice queue one nudge, however ``fire_at`` moved.
    Partitioned by the UTC day of ``intended_at``: the primary key is ``(id,
    intended_at)``, Django's pk stays ``id`` (one identity sequence keeps it unique).
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
        help_text="When the subject starts, as materialized; a different start means it moved."
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
    failure_kind = models.CharField(
        max_length=20,
        choices=FailureKind.choices,
        blank=True,
        db_default="",
        help_text="What went wrong (scheduled_sends/failures.py); last_error says it in words.",
    )
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
            # A failure kind only on a failed row, or a sent one the provider
            # later reported undelivered.
            models.CheckConstraint(
                name="scheduled_sends_failure_kind_matches_outcome",
                condition=models.Q(failure_kind="")
                | (models.Q(outcome="failed") & ~models.Q(failure_kind="undelivered"))
                | models.Q(outcome="sent", failure_kind="undelivered"),
            ),
        ]
        # fillfactor is set per partition (statements.CREATE_DAY_PARTITION).
        indexes = [
            # The claim's order, over unsettled rows only.
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
            # Materialize's read of one user's pending rows (without it, a freshly
            # filled queue's plan walks the claim's index through every tenant).
            models.Index(
                fields=["user", "intended_at"],
                condition=models.Q(sent_at__isnull=True, outcome__isnull=True),
                name="sends_user_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        # Its zone written out, the active one: the admin shows it beside the row's instants.
        return f"{self.get_kind_display()} #{self.ref_id} at {when_text(self.intended_at, False)}"


class NudgeAct(TenantModel):
    """Something the user did from a nudge's message: Snooze or Done.

    One row per (nudge, act), so a double tap or replayed callback changes
    nothing. Materialize plans snoozed nudges from ``snoozed_until``.
    ``source_send_id`` is no foreign key: queue rows are pruned, acts outlive them.
    """

    class Act(models.TextChoices):
        SNOOZE = "snooze", "Snoozed"
        DONE = "done", "Marked done"

    source_send_id = models.BigIntegerField(help_text="The queue row whose message was acted on.")
    act = models.CharField(max_length=8, choices=Act.choices)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    ref_id = models.BigIntegerField()
    subject_starts_at = models.DateTimeField()
    snoozed_until = models.DateTimeField(
        null=True, blank=True, help_text="The snoozed nudge's intended instant (snooze only)."
    )
    via = models.CharField(max_length=16, choices=Channel.choices)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "nudge_acts"
        constraints = [
            models.UniqueConstraint(
                fields=("user", "source_send_id", "act"), name="nudge_acts_once_per_nudge"
            ),
            models.CheckConstraint(
                name="nudge_acts_snooze_has_instant",
                condition=models.Q(act="snooze", snoozed_until__isnull=False)
                | models.Q(act="done", snoozed_until__isnull=True),
            ),
        ]
        indexes = [
            # Materialize's read of a user's live snoozes; the history's read by time.
            models.Index(fields=["user", "snoozed_until"], name="nudge_acts_user_until_idx"),
            models.Index(fields=["user", "created_at"], name="nudge_acts_user_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_act_display()} {self.kind} #{self.ref_id}"


class SweepRun(models.Model):
    """One run of a sweep, so health can tell a quiet minute from an outage; no user data."""

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
        indexes = [
            models.Index(fields=["sweep", "-as_of"], name="sweep_runs_recent_idx"),
            # The few runs still "running", for closing those that never finished.
            models.Index(
                fields=["sweep", "started_at"],
                condition=models.Q(status="running"),
                name="sweep_runs_running_idx",
            ),
        ]

    def __str__(self) -> str:
        # Zone written out: the run's page shows instants in the viewer's zone beside it.
        started = when_text(self.started_at) if self.started_at else "(not started)"
        return f"{self.sweep} {self.status} at {started}"


class MaterializeCycle(models.Model):
    """One 15-minute materialize cycle, shared by every process that joins it; no user data."""

    starts_at = models.DateTimeField(
        primary_key=True, help_text="The cycle's slot: the run's instant floored to 15 minutes."
    )
    as_of = models.DateTimeField(help_text="The instant every participant plans from.")
    slices = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "materialize_cycles"

    def __str__(self) -> str:
        return f"materialize cycle {self.starts_at:%Y-%m-%d %H:%M}"


class MaterializeSlice(models.Model):
    """A range of user ids of one cycle, claimed by one participant at a time (not a tenant
    table). ``claimed_at`` is a renewed lease; a lapsed one is taken over."""

    cycle = models.ForeignKey(MaterializeCycle, on_delete=models.CASCADE, related_name="slice_rows")
    position = models.PositiveIntegerField(help_text="Claim order within the cycle.")
    after_id = models.BigIntegerField(help_text="Users with an id above this ...")
    up_to = models.BigIntegerField(null=True, help_text="... and up to this (none: no bound).")
    claimed_by = models.CharField(max_length=100, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    users = models.PositiveIntegerField(default=0)
    takeovers = models.PositiveSmallIntegerField(default=0)

    class Meta:
        db_table = "materialize_slices"
        constraints = [
            models.UniqueConstraint(
                fields=["cycle", "position"], name="materialize_slices_position_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"slice {self.position} of {self.cycle_id:%Y-%m-%d %H:%M}"
