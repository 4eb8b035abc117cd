"""The queue's knobs, read from settings at call time (so tests can override them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings


@dataclass(frozen=True)
class QueueConfig:
    lookahead: timedelta
    default_lead: timedelta
    max_lead: timedelta
    grace: timedelta
    lease: timedelta
    batch_size: int
    run_budget_seconds: float
    retry_delay: timedelta
    # A due row unclaimed for longer than this means delivery is not happening.
    overdue_after: timedelta

    @classmethod
    def from_settings(cls) -> QueueConfig:
        config = cls(
            lookahead=timedelta(minutes=settings.NUDGE_LOOKAHEAD_MINUTES),
            default_lead=timedelta(minutes=settings.NUDGE_DEFAULT_LEAD_MINUTES),
            max_lead=timedelta(minutes=settings.NUDGE_MAX_LEAD_MINUTES),
            grace=timedelta(minutes=settings.NUDGE_GRACE_MINUTES),
            lease=timedelta(seconds=settings.NUDGE_LEASE_SECONDS),
            batch_size=settings.NUDGE_BATCH_SIZE,
            run_budget_seconds=settings.NUDGE_RUN_BUDGET_SECONDS,
            retry_delay=timedelta(seconds=settings.NUDGE_RETRY_DELAY_SECONDS),
            overdue_after=timedelta(seconds=settings.NUDGE_HEALTH_OVERDUE_SECONDS),
        )
        config.validate()
        return config

    def validate(self) -> None:
        """Refuse settings that would make the queue unsafe, with the reason."""
        if self.batch_size < 1:
            raise ValueError("NUDGE_BATCH_SIZE must be at least 1")
        if self.grace <= timedelta(0):
            raise ValueError("NUDGE_GRACE_MINUTES must be positive")
        # A run may overrun its budget by one send; the lease must outlast it
        # comfortably, or a live run's rows could be claimed a second time.
        if self.lease.total_seconds() < 2 * self.run_budget_seconds:
            raise ValueError(
                "NUDGE_LEASE_SECONDS must be at least twice NUDGE_RUN_BUDGET_SECONDS "
                f"(lease {self.lease.total_seconds():.0f}s, budget {self.run_budget_seconds}s)"
            )
