"""The queue's knobs, read from settings at call time (so tests can override them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings

# The channels whose send rate is a setting of its own; others are unpaced.
RATE_SETTINGS = {
    "telegram": "NUDGE_TELEGRAM_RATE",
    "whatsapp": "NUDGE_WHATSAPP_RATE",
    "console": "NUDGE_CONSOLE_RATE",
}


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
    send_concurrency: int = 32
    # Messages per second per channel across all deliver processes; 0 = unpaced.
    channel_rates: dict[str, float] = field(default_factory=dict)
    per_chat_interval: float = 1.0
    max_early: timedelta = timedelta(minutes=6)
    smoothing_headroom: float = 0.9
    max_p95_lateness: timedelta = timedelta(seconds=60)
    # What one tenant may put on the shared queue (see materialize.cap_per_user).
    max_nudges_per_user: int = 200
    max_nudges_per_user_minute: int = 10
    # A materialise run stops visiting users after this and hands over.
    materialize_budget_seconds: float = 780.0

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
            send_concurrency=settings.NUDGE_SEND_CONCURRENCY,
            channel_rates={
                channel: float(getattr(settings, name)) for channel, name in RATE_SETTINGS.items()
            },
            per_chat_interval=settings.NUDGE_PER_CHAT_INTERVAL_SECONDS,
            max_early=timedelta(minutes=settings.NUDGE_MAX_EARLY_MINUTES),
            smoothing_headroom=settings.NUDGE_SMOOTHING_HEADROOM,
            max_p95_lateness=timedelta(seconds=settings.NUDGE_HEALTH_MAX_P95_LATENESS_SECONDS),
            max_nudges_per_user=settings.NUDGE_MAX_NUDGES_PER_USER,
            max_nudges_per_user_minute=settings.NUDGE_MAX_NUDGES_PER_USER_MINUTE,
            materialize_budget_seconds=settings.NUDGE_MATERIALIZE_BUDGET_SECONDS,
        )
        config.validate()
        return config

    def replace(self, **changes: object) -> QueueConfig:
        """A validated copy with some knobs changed (a command's --batch-size, a test)."""
        config = dataclasses.replace(self, **changes)
        config.validate()
        return config

    def rate(self, channel: str) -> float:
        """Messages per second ``channel`` may send; 0 means unpaced."""
        return self.channel_rates.get(channel, 0.0)

    def per_minute_capacity(self, channel: str) -> int | None:
        """How many nudges one minute may hold before smoothing moves some earlier.

        What the channel's rate sends while a minute's deliver run is sending
        (its budget, at most the minute), less the headroom.
        """
        rate = self.rate(channel)
        if rate <= 0:
            return None
        sending_seconds = min(60.0, self.run_budget_seconds)
        return max(1, int(rate * sending_seconds * self.smoothing_headroom))

    def validate(self) -> None:
        """Refuse settings that would make the queue unsafe, with the reason."""
        if self.batch_size < 1:
            raise ValueError("NUDGE_BATCH_SIZE must be at least 1")
        if self.grace <= timedelta(0):
            raise ValueError("NUDGE_GRACE_MINUTES must be positive")
        if self.send_concurrency < 1:
            raise ValueError("NUDGE_SEND_CONCURRENCY must be at least 1")
        for channel, rate in self.channel_rates.items():
            if rate < 0:
                raise ValueError(f"{RATE_SETTINGS.get(channel, channel)} must not be negative")
        for name in (
            "max_nudges_per_user",
            "max_nudges_per_user_minute",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"NUDGE_{name.upper()} must be at least 1")
        if self.max_early < timedelta(0):
            raise ValueError("NUDGE_MAX_EARLY_MINUTES must not be negative")
        if not 0 < self.smoothing_headroom <= 1:
            raise ValueError("NUDGE_SMOOTHING_HEADROOM must be in (0, 1]")
        # A run may overrun its budget by one send; the lease must outlast it
        # comfortably, or a live run's rows could be claimed a second time.
        if self.lease.total_seconds() < 2 * self.run_budget_seconds:
            raise ValueError(
                "NUDGE_LEASE_SECONDS must be at least twice NUDGE_RUN_BUDGET_SECONDS "
                f"(lease {self.lease.total_seconds():.0f}s, budget {self.run_budget_seconds}s)"
            )
