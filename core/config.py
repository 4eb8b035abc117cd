"""The product's knobs: one typed, validated object, read everywhere.

A few are public settings an operator sets in the environment; the rest are internal
tuning, changed only by tests and benchmarks (``NUDGE_TUNING``). ``NudgeConfig`` turns
them into durations, rates and limits, refuses unsafe combinations (naming the knob
and the reason; ``manage.py check`` runs the same), and is built at call time, so a
test's ``settings`` override takes effect. Secrets and provider addresses stay plain
Django settings, each read by the one module that uses it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# The longest lead the schema allows (``delivery_settings_lead_in_range``).
SCHEMA_MAX_LEAD = timedelta(hours=24)


def minutes(value: float) -> timedelta:
    return timedelta(minutes=value)


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def hours(value: float) -> timedelta:
    return timedelta(hours=value)


def days(value: float) -> timedelta:
    return timedelta(days=value)


def as_is(value: float) -> float:
    return value


def host_list(value: str) -> tuple[str, ...]:
    """A comma-separated list of host names, lower-cased, blanks dropped."""
    return tuple(host for host in (part.strip().lower() for part in value.split(",")) if host)


# What a meeting-host entry may be: a host name, or ``*.`` and a host name.
_LABEL = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
_MEETING_HOST = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})+")

# The meeting services whose links a nudge may carry (providers/meeting_links.py).
DEFAULT_MEETING_HOSTS = (
    "meet.google.com,*.zoom.us,teams.microsoft.com,teams.live.com,*.webex.com,"
    "whereby.com,meet.jit.si"
)


@dataclass(frozen=True)
class Knob:
    """One setting: its name, the ``NudgeConfig`` attribute it becomes, its one default
    (in the setting's own unit) and how the value becomes the attribute."""

    setting: str
    attribute: str
    default: int | float | str
    convert: Callable[..., object] = as_is
    # Public: an operator sets it in the environment (docs/OPERATIONS.md, "Settings");
    # otherwise internal tuning, changed only through NUDGE_TUNING.
    public: bool = False


# Every knob; docs/OPERATIONS.md's "Settings" names the public ones and "Internal
# tuning" explains the rest (``tests/test_config.py`` holds the docs to this).
KNOBS: tuple[Knob, ...] = (
    # --- the queue ---
    Knob("NUDGE_LOOKAHEAD_MINUTES", "lookahead", 180, minutes),
    Knob("NUDGE_DEFAULT_LEAD_MINUTES", "default_lead", 10, minutes, public=True),
    Knob("NUDGE_MAX_LEAD_MINUTES", "max_lead", 24 * 60, minutes),
    Knob("NUDGE_GRACE_MINUTES", "grace", 15, minutes),
    Knob("NUDGE_LEASE_SECONDS", "lease", 300, seconds),
    Knob("NUDGE_BATCH_SIZE", "batch_size", 200),
    Knob("NUDGE_RUN_BUDGET_SECONDS", "run_budget_seconds", 55),
    Knob("NUDGE_RETRY_DELAY_SECONDS", "retry_delay", 60, seconds),
    Knob("NUDGE_SEND_CONCURRENCY", "send_concurrency", 32),
    # Messages per second per channel across all deliver processes; 0 = unpaced.
    Knob("NUDGE_TELEGRAM_RATE", "telegram_rate", 25.0, public=True),
    Knob("NUDGE_WHATSAPP_RATE", "whatsapp_rate", 60.0, public=True),
    Knob("NUDGE_CONSOLE_RATE", "console_rate", 0.0),
    Knob("NUDGE_PER_CHAT_INTERVAL_SECONDS", "per_chat_interval", 1.0),
    Knob("NUDGE_MAX_EARLY_MINUTES", "max_early", 6, minutes),
    # A minute's deliver run starts seconds into it and 429s hold the rate under the planning
    # mean, so a minute is planned a fifth short of what the rate would carry.
    Knob("NUDGE_SMOOTHING_HEADROOM", "smoothing_headroom", 0.8),
    # A 429 multiplies a budget's rate in force (or what the provider accepted) by
    # this; each minute without one raises it by this share of itself (pacing/pacer.py).
    Knob("NUDGE_PACING_BACKOFF", "pacing_backoff", 0.9),
    Knob("NUDGE_PACING_RECOVERY_PER_MINUTE", "pacing_recovery_per_minute", 0.1),
    # What one tenant may put on the shared queue (see materialize.cap_per_user).
    Knob("NUDGE_MAX_NUDGES_PER_USER", "max_nudges_per_user", 200),
    Knob("NUDGE_MAX_NUDGES_PER_USER_MINUTE", "max_nudges_per_user_minute", 10),
    # A materialize run stops visiting users after this and hands over.
    Knob("NUDGE_MATERIALIZE_BUDGET_SECONDS", "materialize_budget_seconds", 780),
    # A cycle's users are split into slices of this many, claimed one at a time
    # by every materialize process of the cycle; a slice's holder renews its
    # lease, and one whose lease lapsed (the holder died) is taken over.
    Knob("NUDGE_MATERIALIZE_SLICE_USERS", "materialize_slice_users", 250),
    Knob("NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS", "materialize_slice_lease", 180, seconds),
    # --- health ---
    # A due row unclaimed for longer than this means delivery is not happening.
    Knob("NUDGE_HEALTH_OVERDUE_SECONDS", "overdue_after", 120, seconds),
    Knob("NUDGE_HEALTH_MAX_P95_LATENESS_SECONDS", "max_p95_lateness", 60, seconds),
    Knob("NUDGE_HEALTH_DELIVER_STALE_MINUTES", "deliver_stale_after", 5, minutes),
    Knob("NUDGE_HEALTH_MATERIALIZE_STALE_MINUTES", "materialize_stale_after", 45, minutes),
    # --- calendars ---
    Knob("CALENDAR_HTTP_TIMEOUT_SECONDS", "calendar_http_timeout_seconds", 15.0),
    Knob("CALENDAR_SYNC_BUDGET_SECONDS", "calendar_sync_budget_seconds", 60.0),
    Knob("CALENDAR_SYNC_USER_BUDGET_SECONDS", "calendar_sync_user_budget_seconds", 120.0),
    Knob("ICS_MAX_BYTES", "ics_max_bytes", 5 * 1024 * 1024),
    # The only hosts a nudge's join link may point to (https only; "*." = and subdomains).
    Knob("CALENDAR_MEETING_HOSTS", "meeting_hosts", DEFAULT_MEETING_HOSTS, host_list),
    # Connections fetched at once by one sweep process, and this many from a feed host
    # (host and port) at first: then learned from its answers (pacing/host_slots.py).
    Knob("CALENDAR_SYNC_CONCURRENCY", "calendar_sync_concurrency", 64),
    Knob("CALENDAR_SYNC_PER_HOST", "calendar_sync_per_host", 16),
    # Database connections one sweep process writes synced calendars and queues
    # users on, each on a thread of its own, so round trips overlap.
    Knob("CALENDAR_SYNC_DB_LANES", "calendar_sync_db_lanes", 6),
    # Provider requests a minute, shared by every process; 0 = unpaced. Google
    # publishes 10,000 a minute per project and 600 per user; Graph (Outlook)
    # 10,000 per 10 minutes per app and mailbox, 130,000 per 10 s per app.
    Knob("CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE", "google_project_rate_per_minute", 8000.0),
    # Google project requests that may go at once after a quiet spell (a token
    # bucket; pacing/pacer.py): Google counts a sliding minute, so any minute
    # then holds at most this plus the rate a minute. The rate plus the burst
    # must stay within the project's quota a minute (8,000 + 1,500 of 10,000:
    # the rest for requests a little late on their slots). 0 = evenly spaced.
    Knob("CALENDAR_GOOGLE_PROJECT_BURST", "google_project_burst", 1500),
    Knob("CALENDAR_GOOGLE_USER_RATE_PER_MINUTE", "google_user_rate_per_minute", 480.0),
    Knob("CALENDAR_GRAPH_APP_RATE_PER_MINUTE", "graph_app_rate_per_minute", 600_000.0),
    Knob("CALENDAR_GRAPH_MAILBOX_RATE_PER_MINUTE", "graph_mailbox_rate_per_minute", 800.0),
    # Push from Google and Microsoft: the public https address providers post to
    # (<it>/calendars/push/...); empty = every calendar is polled.
    Knob("CALENDAR_PUSH_BASE_URL", "calendar_push_base_url", ""),
    # A calendar with live push is fetched when notified and at least this often.
    Knob("CALENDAR_SAFETY_POLL_MINUTES", "calendar_safety_poll", 360, minutes),
    # --- the end-user area ---
    Knob("NUDGE_LINK_CODE_MINUTES", "link_code_lifetime", 15, minutes),
    # How long used or expired link codes, and inbound Twilio message ids, are kept.
    Knob("NUDGE_LINK_CODE_RETENTION_HOURS", "link_code_retention", 24, hours),
    Knob("NUDGE_INBOUND_SEEN_DAYS", "inbound_seen_retention", 90, days),
    # Per-user caps (a user past one is refused with the limit named) and the API's rate.
    Knob("NUDGE_MAX_CALENDARS_PER_USER", "max_calendars_per_user", 10),
    Knob("NUDGE_MAX_FOLLOW_UPS_PER_USER", "max_follow_ups_per_user", 1000),
    Knob("NUDGE_MAX_API_TOKENS_PER_USER", "max_api_tokens_per_user", 10),
    Knob("NUDGE_API_REQUESTS_PER_MINUTE", "api_requests_per_minute", 60),
    # Acting from a nudge (issue 22): how long Snooze waits, and the WhatsApp
    # Content template with quick-reply buttons ("" = reply "snooze" / "done").
    Knob("NUDGE_SNOOZE_MINUTES", "snooze", 10, minutes),
    Knob("TWILIO_ACTIONS_CONTENT_SID", "whatsapp_actions_content_sid", "", public=True),
    # --- sign-in and password reset (portal/signin.py) ---
    Knob("NUDGE_SIGNIN_FAILURE_LIMIT", "signin_failure_limit", 10),
    Knob("NUDGE_SIGNIN_LOCKOUT_MINUTES", "signin_lockout", 15, minutes),
    Knob("NUDGE_PASSWORD_RESET_PER_ADDRESS_HOUR", "password_resets_per_address_hour", 3),
    Knob("NUDGE_PASSWORD_RESET_PER_CLIENT_HOUR", "password_resets_per_client_hour", 10),
)

# The channels whose send rate is a knob of its own; others are unpaced.
RATE_SETTINGS = {
    "telegram": "NUDGE_TELEGRAM_RATE",
    "whatsapp": "NUDGE_WHATSAPP_RATE",
    "console": "NUDGE_CONSOLE_RATE",
}


# Tests and benchmarks change internal tuning in a child process through this
# variable (JSON: {"NUDGE_BATCH_SIZE": 4, …}); it is not an operator setting.
TUNING_VARIABLE = "NUDGE_TUNING"
# The knobs that are internal tuning, by setting name.
TUNING_SETTINGS = frozenset(knob.setting for knob in KNOBS if not knob.public)


def knob_settings(
    env: Any, derived: Mapping[str, int | float | str] | None = None
) -> dict[str, int | float | str]:
    """Every knob as a Django setting: public ones read from the environment (``env``),
    the ``derived`` ones as given, the rest at their default unless ``NUDGE_TUNING``
    changes them; the default's type says how a value is read."""
    readers = {float: env.float, int: env.int, str: env.str}
    values = {
        knob.setting: readers[type(knob.default)](knob.setting, default=knob.default)
        if knob.public
        else knob.default
        for knob in KNOBS
    }
    values.update(derived or {})
    tuning = json.loads(env.str(TUNING_VARIABLE, default="{}"))
    unknown = sorted(set(tuning) - TUNING_SETTINGS)
    if unknown:
        raise ImproperlyConfigured(f"{TUNING_VARIABLE} names no internal tuning: {unknown}")
    for knob in KNOBS:
        if knob.setting in tuning:
            values[knob.setting] = type(knob.default)(tuning[knob.setting])
    return values


def with_tuning(environment: dict[str, str]) -> dict[str, str]:
    """A child process's environment with the tuning it names (``NUDGE_BATCH_SIZE="4"``)
    also in ``NUDGE_TUNING``; the names stay, for an older commit that read them."""
    tuning = {name: environment[name] for name in TUNING_SETTINGS if name in environment}
    if not tuning:
        return environment
    return {**environment, TUNING_VARIABLE: json.dumps(tuning)}


def stray_tuning(environment: Mapping[str, str]) -> list[str]:
    """Internal tuning names set in the environment, where they change nothing."""
    if TUNING_VARIABLE in environment:
        return []
    return [
        knob.setting
        for knob in KNOBS
        if knob.setting in TUNING_SETTINGS and knob.setting in environment
    ]


def _push_base_url_ok(url: str) -> bool:
    """Providers post only to https (Google refuses anything else); loopback is for tests."""
    if not url:
        return True
    parts = urlsplit(url)
    if parts.query or parts.fragment or not parts.hostname:
        return False
    return parts.scheme == "https" or (
        parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")
    )


@dataclass(frozen=True)
class NudgeConfig:
    """The knobs, typed (``KNOBS``' attributes, plus the channels' sender classes); built
    at an entry point (a command, a view, a cron route) and passed down."""

    # --- the queue ---
    lookahead: timedelta
    default_lead: timedelta
    max_lead: timedelta
    grace: timedelta
    lease: timedelta
    batch_size: int
    run_budget_seconds: float
    retry_delay: timedelta
    send_concurrency: int
    telegram_rate: float
    whatsapp_rate: float
    console_rate: float
    per_chat_interval: float
    max_early: timedelta
    smoothing_headroom: float
    pacing_backoff: float
    pacing_recovery_per_minute: float
    max_nudges_per_user: int
    max_nudges_per_user_minute: int
    materialize_budget_seconds: float
    materialize_slice_users: int
    materialize_slice_lease: timedelta
    # --- health ---
    overdue_after: timedelta
    max_p95_lateness: timedelta
    deliver_stale_after: timedelta
    materialize_stale_after: timedelta
    # --- calendars ---
    calendar_http_timeout_seconds: float
    calendar_sync_budget_seconds: float
    calendar_sync_user_budget_seconds: float
    ics_max_bytes: int
    meeting_hosts: tuple[str, ...]
    calendar_sync_concurrency: int
    calendar_sync_per_host: int
    calendar_sync_db_lanes: int
    google_project_rate_per_minute: float
    google_project_burst: int
    google_user_rate_per_minute: float
    graph_app_rate_per_minute: float
    graph_mailbox_rate_per_minute: float
    # Push (calendars/push/): where providers post notifications ("" = poll only),
    # and how often a calendar with live push is fetched anyway.
    calendar_push_base_url: str
    calendar_safety_poll: timedelta
    # --- the end-user area ---
    link_code_lifetime: timedelta
    link_code_retention: timedelta
    inbound_seen_retention: timedelta
    max_calendars_per_user: int
    max_follow_ups_per_user: int
    max_api_tokens_per_user: int
    api_requests_per_minute: int
    snooze: timedelta
    whatsapp_actions_content_sid: str
    # --- sign-in and password reset (portal/signin.py) ---
    signin_failure_limit: int
    signin_lockout: timedelta
    password_resets_per_address_hour: int
    password_resets_per_client_hour: int
    # Which class sends each channel (dotted paths; NUDGE_CHANNEL_BACKENDS).
    channel_backends: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, *, validate: bool = True) -> NudgeConfig:
        """The knobs as set now; invalid ones raise ``ValueError`` unless ``validate`` is off."""
        config = cls(
            **{
                knob.attribute: knob.convert(getattr(settings, knob.setting, knob.default))
                for knob in KNOBS
            },
            channel_backends=dict(settings.NUDGE_CHANNEL_BACKENDS),
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
        """Subjects whose nudges can fall in the look-ahead (from the grace window's start
        to the look-ahead plus the longest lead): sync fetches it, materialize plans from it."""
        return now - self.grace, now + self.lookahead + self.max_lead

    @property
    def channel_rates(self) -> dict[str, float]:
        """Messages per second per paced channel, across all deliver processes; 0 = unpaced."""
        return {channel: getattr(self, f"{channel}_rate") for channel in RATE_SETTINGS}

    def rate(self, channel: str) -> float:
        """Messages per second ``channel`` may send; 0 means unpaced."""
        return self.channel_rates.get(channel, 0.0)

    def planning_rate(self, channel: str, rate_in_force: float | None = None) -> float:
        """The rate smoothing may count on for ``channel``; 0 = unpaced. At or above the
        provider's limit the pacer saws between the ceiling and ``pacing_backoff`` of it,
        averaging ``(1 + backoff) / 2``: a plan counts on that mean, or on the rate in
        force when a 429 has lowered it further."""
        ceiling = self.rate(channel)
        if ceiling <= 0:
            return 0.0
        mean = ceiling * (1 + self.pacing_backoff) / 2
        return mean if rate_in_force is None else max(0.0, min(mean, rate_in_force))

    def per_minute_capacity(self, channel: str, rate_in_force: float | None = None) -> int | None:
        """How many nudges one minute may hold before smoothing moves some earlier: what the
        planning rate sends during a minute's deliver run, less the headroom (the console's
        look-ahead chart draws the same line)."""
        if self.rate(channel) <= 0:
            return None
        rate = self.planning_rate(channel, rate_in_force)
        sending_seconds = min(60.0, self.run_budget_seconds)
        return max(1, int(rate * sending_seconds * self.smoothing_headroom))

    def validate(self) -> None:
        """Refuse settings that would make the queue unsafe, with the setting and the reason."""
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        """Every invalid knob, worded for whoever set it."""
        at_least_one = {
            "NUDGE_BATCH_SIZE": self.batch_size,
            "NUDGE_SEND_CONCURRENCY": self.send_concurrency,
            "NUDGE_MATERIALIZE_SLICE_USERS": self.materialize_slice_users,
            "NUDGE_MAX_NUDGES_PER_USER": self.max_nudges_per_user,
            "NUDGE_MAX_NUDGES_PER_USER_MINUTE": self.max_nudges_per_user_minute,
            "ICS_MAX_BYTES": self.ics_max_bytes,
            # Above the concurrency it simply caps nothing.
            "CALENDAR_SYNC_PER_HOST": self.calendar_sync_per_host,
            "NUDGE_MAX_CALENDARS_PER_USER": self.max_calendars_per_user,
            "NUDGE_MAX_FOLLOW_UPS_PER_USER": self.max_follow_ups_per_user,
            "NUDGE_MAX_API_TOKENS_PER_USER": self.max_api_tokens_per_user,
            "NUDGE_API_REQUESTS_PER_MINUTE": self.api_requests_per_minute,
            "NUDGE_SIGNIN_FAILURE_LIMIT": self.signin_failure_limit,
            "NUDGE_PASSWORD_RESET_PER_ADDRESS_HOUR": self.password_resets_per_address_hour,
            "NUDGE_PASSWORD_RESET_PER_CLIENT_HOUR": self.password_resets_per_client_hour,
        }
        positive = {
            "NUDGE_LOOKAHEAD_MINUTES": self.lookahead.total_seconds(),
            "NUDGE_GRACE_MINUTES": self.grace.total_seconds(),
            "NUDGE_RUN_BUDGET_SECONDS": self.run_budget_seconds,
            "NUDGE_MATERIALIZE_BUDGET_SECONDS": self.materialize_budget_seconds,
            "NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS": self.materialize_slice_lease.total_seconds(),
            "CALENDAR_HTTP_TIMEOUT_SECONDS": self.calendar_http_timeout_seconds,
            "CALENDAR_SYNC_BUDGET_SECONDS": self.calendar_sync_budget_seconds,
            "CALENDAR_SYNC_USER_BUDGET_SECONDS": self.calendar_sync_user_budget_seconds,
            "NUDGE_SIGNIN_LOCKOUT_MINUTES": self.signin_lockout.total_seconds(),
        }
        not_negative = {
            **{RATE_SETTINGS[channel]: rate for channel, rate in self.channel_rates.items()},
            "NUDGE_MAX_EARLY_MINUTES": self.max_early.total_seconds(),
            "CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE": self.google_project_rate_per_minute,
            "CALENDAR_GOOGLE_USER_RATE_PER_MINUTE": self.google_user_rate_per_minute,
            "CALENDAR_GRAPH_APP_RATE_PER_MINUTE": self.graph_app_rate_per_minute,
            "CALENDAR_GRAPH_MAILBOX_RATE_PER_MINUTE": self.graph_mailbox_rate_per_minute,
            "CALENDAR_GOOGLE_PROJECT_BURST": self.google_project_burst,
        }
        day = timedelta(hours=24)
        rules = [
            *((value >= 1, f"{name} must be at least 1") for name, value in at_least_one.items()),
            *((value > 0, f"{name} must be positive") for name, value in positive.items()),
            *((value >= 0, f"{name} must not be negative") for name, value in not_negative.items()),
            (
                timedelta(minutes=1) <= self.snooze <= day,
                "NUDGE_SNOOZE_MINUTES must be between 1 and 1440",
            ),
            (
                timedelta(0) <= self.max_lead <= SCHEMA_MAX_LEAD,
                "NUDGE_MAX_LEAD_MINUTES must be between 0 and 1440",
            ),
            (
                timedelta(0) <= self.default_lead <= SCHEMA_MAX_LEAD,
                "NUDGE_DEFAULT_LEAD_MINUTES must be between 0 and 1440",
            ),
            (0 < self.smoothing_headroom <= 1, "NUDGE_SMOOTHING_HEADROOM must be in (0, 1]"),
            (0 < self.pacing_backoff < 1, "NUDGE_PACING_BACKOFF must be in (0, 1)"),
            (
                0 < self.pacing_recovery_per_minute <= 1,
                "NUDGE_PACING_RECOVERY_PER_MINUTE must be in (0, 1]",
            ),
            (
                all(_MEETING_HOST.fullmatch(host) for host in self.meeting_hosts),
                "CALENDAR_MEETING_HOSTS must be comma-separated host names (a leading '*.' "
                "also allows its subdomains)",
            ),
            (
                1 <= self.calendar_sync_concurrency <= 512,
                "CALENDAR_SYNC_CONCURRENCY must be between 1 and 512",
            ),
            (
                1 <= self.calendar_sync_db_lanes <= 64,
                "CALENDAR_SYNC_DB_LANES must be between 1 and 64",
            ),
            # The hourly allowance of WhatsApp codes counts the last hour's codes.
            (
                self.link_code_retention >= max(timedelta(hours=1), self.link_code_lifetime),
                "NUDGE_LINK_CODE_RETENTION_HOURS must be at least 1 and cover "
                "NUDGE_LINK_CODE_MINUTES",
            ),
            (
                self.inbound_seen_retention >= timedelta(days=1),
                "NUDGE_INBOUND_SEEN_DAYS must be at least 1",
            ),
            (
                timedelta(minutes=15) <= self.calendar_safety_poll <= day,
                "CALENDAR_SAFETY_POLL_MINUTES must be between 15 and 1440",
            ),
            (
                _push_base_url_ok(self.calendar_push_base_url),
                "CALENDAR_PUSH_BASE_URL must be empty or an https:// address without a query "
                "(plain http only on a loopback host)",
            ),
            # A run may overrun its budget by one send; the lease must outlast it
            # comfortably, or a live run's rows could be claimed a second time.
            (
                self.lease.total_seconds() >= 2 * self.run_budget_seconds,
                "NUDGE_LEASE_SECONDS must be at least twice NUDGE_RUN_BUDGET_SECONDS "
                f"(lease {self.lease.total_seconds():.0f}s, budget {self.run_budget_seconds}s)",
            ),
        ]
        return [message for ok, message in rules if not ok]
