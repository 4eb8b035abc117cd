"""The shared budgets' table: one row per named send or request budget."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class ChannelPacing(models.Model):
    """One named send or request budget, shared by every process: its next free
    slot and the rate in force after a provider's 429.

    Not a tenant table: budget names, instants and rates, no user data.
    """

    budget = models.CharField(max_length=64, primary_key=True)
    next_slot_at = models.DateTimeField(db_default=Now())
    # The configured rate (per second) the last process to use it stated.
    ceiling = models.FloatField(null=True)
    # What a 429 lowered the rate to, and when; NULL: at the ceiling.
    rate = models.FloatField(null=True)
    rate_since = models.DateTimeField(null=True)

    class Meta:
        db_table = "channel_pacing"

    def __str__(self) -> str:
        return f"{self.budget}: next slot {self.next_slot_at:%H:%M:%S.%f}"
