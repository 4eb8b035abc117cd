"""The shared budgets' table: one row per named send or request budget."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class ChannelPacing(models.Model):
    """One named send or request budget, shared by every process: its next free slot
    and the rate in force after a 429. Not a tenant table: no user data."""

    budget = models.CharField(max_length=64, primary_key=True)
    next_slot_at = models.DateTimeField(db_default=Now())
    # The configured rate (per second) the last process to use it stated.
    ceiling = models.FloatField(null=True)
    # What a 429 lowered the rate to, and when; NULL: at the ceiling.
    rate = models.FloatField(null=True)
    rate_since = models.DateTimeField(null=True)
    # Slots sent and 429s heard lately, decayed (``COUNTING_SECONDS``) as of
    # ``counted_at``, counted since ``counting_since``: what the provider accepts.
    sent = models.FloatField(null=True)
    refused = models.FloatField(null=True)
    counted_at = models.DateTimeField(null=True)
    counting_since = models.DateTimeField(null=True)

    class Meta:
        db_table = "channel_pacing"

    def __str__(self) -> str:
        return f"{self.budget}: next slot {self.next_slot_at:%H:%M:%S.%f}"


class HostSlots(models.Model):
    """How many fetches one feed host is given at once, shared by every process
    (``pacing.host_slots``). Not a tenant table: no user data."""

    host = models.CharField(max_length=300, primary_key=True)
    slots = models.FloatField()
    # The last time it answered 429/503, timed out or was slow: growth is careful after.
    limited_at = models.DateTimeField(null=True)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "fetch_host_slots"

    def __str__(self) -> str:
        return f"{self.host}: {self.slots:.1f} slots"
