"""The product's knobs: one typed, validated object, read everywhere.

Django settings (``nudgeproject/settings.py``) read the environment; this
turns the ``NUDGE_*``, ``CALENDAR_*`` and ``ICS_*`` settings into durations,
rates and limits once, refuses combinations that would make the queue unsafe
(with the setting's name and the reason), and is what every module reads —
never ``settings.NUDGE_…`` directly. It is built at call time, so a test's
``settings`` override takes effect. ``manage.py check`` runs the validation
too (``core.checks``), and so does every management command that runs
the system checks as it starts (the sweeps do), so a bad value stops a deploy
or a cron line, not a sweep halfway.

Secrets and provider addresses (tokens, keys, base URLs) stay plain Django
settings, each read by the one module that uses it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

# The channels whose send rate is a setting of its own; others are unpaced.
RATE_SETTINGS = {
    "telegram": "NUDGE_TELEGRAM_RATE",
    "whatsapp": "NUDGE_WHATSAPP_RATE",
    "console": "NUDGE_CONSOLE_RATE",
}
# The longest lead the schema allows (``delivery_settings_lead_in_range``).
SCHEMA_MAX_LEAD = timedelta(hours=24)


@dataclass(frozen=True)
class NudgeConfig:
    # --- the queue ---
    lookahead: timedelta
    default_lead: timedelta
    max_lead: timedelta
    grace: timedelta
    lease: timedelta
    batch_size: int
    run_budget_seconds: float
    retry_delay: timedelta
    send_concurrency: int = 32
    # Messages per second per channel across all deliver processes; 0 = unpaced.
    channel_rates: dict[str, float] = field(default_factory=dict)
    per_chat_interval: float = 1.0
    max_early: timedelta = timedelta(minutes=6)
    smoothing_headroom: float = 0.9
    # What one tenant may put on the shared queue (see materialize.cap_per_user).
    max_nudges_per_user: int = 200
    max_nudges_per_user_minute: int = 10
    # A materialise run stops visiting users after this and hands over.
    materialize_budget_seconds: float = 780.0
    # Which class sends each channel (dotted paths).
    channel_backends: dict[str, str] = field(default_factory=dict)
    # --- health ---
    # A due row unclaimed for longer than this means delivery is not happening.
    overdue_after: timedelta = timedelta(seconds=120)
    max_p95_lateness: timedelta = timedelta(seconds=60)
    deliver_stale_after: timedelta = timedelta(minutes=5)
    materialize_stale_after: timedelta = timedelta(minutes=45)
    # --- calendars ---
    calendar_http_timeout_seconds: float = 15.0
    calendar_sync_budget_seconds: float = 60.0
    calendar_sync_user_budget_seconds: float = 120.0
    ics_max_bytes: int = 5 * 1024 * 1024
    # --- the end-user area ---
    link_code_lifetime: timedelta = timedelta(minutes=15)

    @classmethod
    def from_settings(cls, *, validate: bool = True) -> NudgeConfig:
        """The knobs as they are set now; invalid ones raise ``ValueError`` (unless the
        caller wants to list them itself, as the system check does)."""
        config = cls(
            lookahead=timedelta(minutes=settings.NUDGE_LOOKAHEAD_MINUTES),
            default_lead=timedelta(minutes=settings.NUDGE_DEFAULT_LEAD_MINUTES),
            max_lead=timedelta(minutes=settings.NUDGE_MAX_LEAD_MINUTES),
            grace=timedelta(minutes=settings.NUDGE_GRACE_MINUTES),
            lease=timedelta(seconds=settings.NUDGE_LEASE_SECONDS),
            batch_size=settings.NUDGE_BATCH_SIZE,
            run_budget_seconds=settings.NUDGE_RUN_BUDGET_SECONDS,
            retry_delay=timedelta(seconds=settings.NUDGE_RETRY_DELAY_SECONDS),
            send_concurrency=settings.NUDGE_SEND_CONCURRENCY,
            channel_rates={
                channel: float(getattr(settings, name)) for channel, name in RATE_SETTINGS.items()
            },
            per_chat_interval=settings.NUDGE_PER_CHAT_INTERVAL_SECONDS,
            max_early=timedelta(minutes=settings.NUDGE_MAX_EARLY_MINUTES),
            smoothing_headroom=settings.NUDGE_SMOOTHING_HEADROOM,
            max_nudges_per_user=settings.NUDGE_MAX_NUDGES_PER_USER,
            max_nudges_per_user_minute=settings.NUDGE_MAX_NUDGES_PER_USER_MINUTE,
            materialize_budget_seconds=settings.NUDGE_MATERIALIZE_BUDGET_SECONDS,
            channel_backends=dict(settings.NUDGE_CHANNEL_BACKENDS),
            overdue_after=timedelta(seconds=settings.NUDGE_HEALTH_OVERDUE_SECONDS),
            max_p95_lateness=timedelta(seconds=settings.NUDGE_HEALTH_MAX_P95_LATENESS_SECONDS),
            deliver_stale_after=timedelta(minutes=settings.NUDGE_HEALTH_DELIVER_STALE_MINUTES),
            materialize_stale_after=timedelta(
                minutes=settings.NUDGE_HEALTH_MATERIALIZE_STALE_MINUTES
            ),
            calendar_http_timeout_seconds=settings.CALENDAR_HTTP_TIMEOUT_SECONDS,
            calendar_sync_budget_seconds=settings.CALENDAR_SYNC_BUDGET_SECONDS,
            calendar_sync_user_budget_seconds=settings.CALENDAR_SYNC_USER_BUDGET_SECONDS,
            ics_max_bytes=settings.ICS_MAX_BYTES,
            link_code_lifetime=timedelta(minutes=settings.NUDGE_LINK_CODE_MINUTES),
        )
        if validate:
            config.validate()
        return config

    def replace(self, **changes: object) -> NudgeConfig:
        """A validated copy with some knobs changed (a command's --batch-size, a test)."""
        config = dataclasses.replace(self, **changes)
        config.validate()
        return config

    def subject_window(self, now: datetime) -> tuple[datetime, datetime]:
        """Subjects whose nudges can fall in the look-ahead: from the grace window's
        start up to the look-ahead plus the longest lead honoured. Sync fetches it,
        materialise plans from it."""
        return now - self.grace, now + self.lookahead + self.max_lead

    def rate(self, channel: str) -> float:
        """Messages per second ``channel`` may send; 0 means unpaced."""
        return self.channel_rates.get(channel, 0.0)

    def per_minute_capacity(self, channel: str) -> int | None:
        """How many nudges one minute may hold before smoothing moves some earlier.

        What the channel's rate sends while a minute's deliver run is sending
        (its budget, at most the minute), less the headroom. The console's
        look-ahead chart draws this same line.
        """
        rate = self.rate(channel)
        if rate <= 0:
            return None
        sending_seconds = min(60.0, self.run_budget_seconds)
        return max(1, int(rate * sending_seconds * self.smoothing_headroom))

    def validate(self) -> None:
        """Refuse settings that would make the queue unsafe, with the setting and the reason."""
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        """Every invalid knob, worded for whoever set it."""
        problems = []

        def require(ok: bool, message: str) -> None:
            if not ok:
                problems.append(message)

        positive = timedelta(0)
        require(self.batch_size >= 1, "NUDGE_BATCH_SIZE must be at least 1")
        require(self.send_concurrency >= 1, "NUDGE_SEND_CONCURRENCY must be at least 1")
        require(self.lookahead > positive, "NUDGE_LOOKAHEAD_MINUTES must be positive")
        require(self.grace > positive, "NUDGE_GRACE_MINUTES must be positive")
        require(
            positive <= self.max_lead <= SCHEMA_MAX_LEAD,
            "NUDGE_MAX_LEAD_MINUTES must be between 0 and 1440",
        )
        require(
            positive <= self.default_lead <= SCHEMA_MAX_LEAD,
            "NUDGE_DEFAULT_LEAD_MINUTES must be between 0 and 1440",
        )
        require(self.run_budget_seconds > 0, "NUDGE_RUN_BUDGET_SECONDS must be positive")
        require(
            self.materialize_budget_seconds > 0, "NUDGE_MATERIALIZE_BUDGET_SECONDS must be positive"
        )
        for channel, rate in self.channel_rates.items():
            require(rate >= 0, f"{RATE_SETTINGS.get(channel, channel)} must not be negative")
        require(self.max_nudges_per_user >= 1, "NUDGE_MAX_NUDGES_PER_USER must be at least 1")
        require(
            self.max_nudges_per_user_minute >= 1,
            "NUDGE_MAX_NUDGES_PER_USER_MINUTE must be at least 1",
        )
        require(self.max_early >= positive, "NUDGE_MAX_EARLY_MINUTES must not be negative")
        require(0 < self.smoothing_headroom <= 1, "NUDGE_SMOOTHING_HEADROOM must be in (0, 1]")
        for name, seconds in (
            ("CALENDAR_HTTP_TIMEOUT_SECONDS", self.calendar_http_timeout_seconds),
            ("CALENDAR_SYNC_BUDGET_SECONDS", self.calendar_sync_budget_seconds),
            ("CALENDAR_SYNC_USER_BUDGET_SECONDS", self.calendar_sync_user_budget_seconds),
        ):
            require(seconds > 0, f"{name} must be positive")
        require(self.ics_max_bytes >= 1, "ICS_MAX_BYTES must be at least 1")
        # A run may overrun its budget by one send; the lease must outlast it
        # comfortably, or a live run's rows could be claimed a second time.
        require(
            self.lease.total_seconds() >= 2 * self.run_budget_seconds,
            "NUDGE_LEASE_SECONDS must be at least twice NUDGE_RUN_BUDGET_SECONDS "
            f"(lease {self.lease.total_seconds():.0f}s, budget {self.run_budget_seconds}s)",
        )
        return problems
