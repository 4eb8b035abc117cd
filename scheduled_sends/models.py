"""The queue (``scheduled_sends``), the channels' shared pacing, and the sweep run log.

A person's delivery settings live in ``accounts``, one floor down."""

from __future__ import annotations

from datetime import UTC, timedelta

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


class ScheduledSend(TenantModel):
    """One nudge: this subject, for this user, at this instant.

    ``claimed_at`` is not ``sent_at``: a claim is a lease a deliver run holds
    while it sends, and it expires; ``sent_at`` is stamped only after a
    successful send or a deliberate skip, never before and never on failure.
    ``intended_at`` is when the nudge is meant to arrive; ``fire_at`` is when
    it is sent, which burst smoothing may move earlier, never later. The
    unique key ``(user_id, kind, ref_id, intended_at)`` makes materializing
    the same window twice queue one nudge, however the send time moved. The
    claim stands on a partial index over unsettled rows in the order
    ``(fire_minute, user_rank, fire_at)``; ``fire_minute`` is ``fire_at``
    truncated to the UTC minute, a column PostgreSQL generates so no writer
    can let it drift. States and transitions: ``scheduled_sends/queue/``.
    The table is partitioned by the UTC day of ``intended_at`` (migration
    ``queue_partitioned_by_intended_day``; ``queue/partitions.py``): its primary key is ``(id,
    intended_at)``, while Django's pk stays ``id``, which one identity
    sequence keeps unique.
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
            # Materialize's read of one user's pending rows. Without it the planner,
            # short of statistics on a freshly filled queue, walks the claim's index
            # through every tenant's live rows for each user.
            models.Index(
                fields=["user", "intended_at"],
                condition=models.Q(sent_at__isnull=True, outcome__isnull=True),
                name="sends_user_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        # Its zone written out, the active one: the admin shows it beside the row's instants.
        return f"{self.get_kind_display()} #{self.ref_id} at {when_text(self.intended_at, False)}"

    @property
    def lateness(self) -> timedelta | None:
        """How late it arrived (negative: early); None until sent."""
        if self.outcome != Outcome.SENT or self.sent_at is None:
            return None
        return self.sent_at - self.intended_at


class NudgeAct(TenantModel):
    """Something the user did from a nudge's message: Snooze or Done.

    One row per (nudge, act): a double tap, a replayed callback or a second
    "snooze" reply finds the first and changes nothing. A snooze is also what
    materialize plans the snoozed nudge from (``snoozed_until``), so the row
    it queued is not withdrawn as unplanned; both acts show in the user's
    history. ``source_send_id`` is not a foreign key: settled queue rows are
    pruned, the record of what the user did outlives them.
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
        # Its zone written out: the run's page shows its instants in the viewer's zone
        # beside this title (issue 33).
        started = when_text(self.started_at) if self.started_at else "(not started)"
        return f"{self.sweep} {self.status} at {started}"


class MaterializeCycle(models.Model):
    """One 15-minute materialize cycle, shared by every process that joins it.

    Not a tenant table: it holds a slot, an instant and a count, never user
    data. The first ``materialize`` of the slot creates it with its slices;
    the others find it (``sweeps/cycle.py``).
    """

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
    """A range of user ids of one cycle, claimed by one participant at a time.

    Not a tenant table: user ids as range bounds and a participant's name
    (host:pid), nothing a user wrote. ``claimed_at`` is a lease the holder
    renews; a slice whose lease lapsed (its holder died) is taken over.
    """

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
