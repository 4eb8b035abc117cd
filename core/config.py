"""The product's knobs: one typed, validated object, read everywhere; built at call time,
so a test's ``settings`` override takes effect. A few are public settings, the rest internal
tuning (``NUDGE_TUNING``). Secrets and provider addresses stay plain Django settings.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# The longest lead the schema allows (``delivery_settings_lead_in_range``), in minutes.
SCHEMA_MAX_LEAD_MINUTES = 24 * 60


def _duration(unit: str, value: float) -> timedelta:
    return timedelta(**{unit: value})


# A knob's value in its setting's unit becomes a duration through one of these.
minutes, seconds, hours, days = (
    partial(_duration, unit) for unit in ("minutes", "seconds", "hours", "days")
)


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
    (in the setting's own unit), how the value becomes the attribute, and its bounds."""

    setting: str
    attribute: str
    default: int | float | str
    convert: Callable[..., object] = as_is
    # Public: an operator sets it in the environment (docs/OPERATIONS.md, "Settings");
    # otherwise internal tuning, changed only through NUDGE_TUNING.
    public: bool = False
    # The values allowed, in the setting's own unit (None: any).
    at_least: float | None = None
    at_most: float | None = None
    positive: bool = False

    def problem(self, value: Any) -> str | None:
        """Why ``value`` (the attribute) is out of bounds, worded for whoever set it."""
        low = None if self.at_least is None else self.convert(self.at_least)
        high = None if self.at_most is None else self.convert(self.at_most)
        if self.positive and not value > self.convert(0):
            return f"{self.setting} must be positive"
        if high is not None and not low <= value <= high:
            return f"{self.setting} must be between {self.at_least} and {self.at_most}"
        if low is not None and not value >= low:
            qualifier = "not be negative" if self.at_least == 0 else f"be at least {self.at_least}"
            return f"{self.setting} must {qualifier}"
        return None


def knob(setting: str, default: int | float | str, *args: Any, **bounds: Any) -> Any:
    """A ``NudgeConfig`` field read from ``setting`` (``KNOBS`` fills in its attribute)."""
    return field(metadata={"knob": Knob(setting, "", default, *args, **bounds)})


@dataclass(frozen=True)
class NudgeConfig:
    """The knobs, typed, each with its one default (docs/OPERATIONS.md's "Settings" names
    the public ones and "Internal tuning" explains the rest), plus the channels' sender
    classes; built at an entry point (a command, a view, a cron route) and passed down."""

    # --- the queue ---
    lookahead: timedelta = knob("NUDGE_LOOKAHEAD_MINUTES", 180, minutes, positive=True)
    default_lead: timedelta = knob(
        "NUDGE_DEFAULT_LEAD_MINUTES",
        10,
        minutes,
        public=True,
        at_least=0,
        at_most=SCHEMA_MAX_LEAD_MINUTES,
    )
    max_lead: timedelta = knob(
        "NUDGE_MAX_LEAD_MINUTES",
        SCHEMA_MAX_LEAD_MINUTES,
        minutes,
        at_least=0,
        at_most=SCHEMA_MAX_LEAD_MINUTES,
    )
    grace: timedelta = knob("NUDGE_GRACE_MINUTES", 15, minutes, positive=True)
    lease: timedelta = knob("NUDGE_LEASE_SECONDS", 300, seconds)
    batch_size: int = knob("NUDGE_BATCH_SIZE", 200, at_least=1)
    run_budget_seconds: float = knob("NUDGE_RUN_BUDGET_SECONDS", 55, positive=True)
    retry_delay: timedelta = knob("NUDGE_RETRY_DELAY_SECONDS", 60, seconds)
    send_concurrency: int = knob("NUDGE_SEND_CONCURRENCY", 32, at_least=1)
    telegram_rate: float = knob("NUDGE_TELEGRAM_RATE", 25.0, public=True, at_least=0)
    whatsapp_rate: float = knob("NUDGE_WHATSAPP_RATE", 60.0, public=True, at_least=0)
    console_rate: float = knob("NUDGE_CONSOLE_RATE", 0.0, at_least=0)
    per_chat_interval: float = knob("NUDGE_PER_CHAT_INTERVAL_SECONDS", 1.0)
    max_early: timedelta = knob("NUDGE_MAX_EARLY_MINUTES", 6, minutes, at_least=0)
    smoothing_headroom: float = knob("NUDGE_SMOOTHING_HEADROOM", 0.8)
    pacing_backoff: float = knob("NUDGE_PACING_BACKOFF", 0.9)
    pacing_recovery_per_minute: float = knob("NUDGE_PACING_RECOVERY_PER_MINUTE", 0.1)
    max_nudges_per_user: int = knob("NUDGE_MAX_NUDGES_PER_USER", 200, at_least=1)
    max_nudges_per_user_minute: int = knob("NUDGE_MAX_NUDGES_PER_USER_MINUTE", 10, at_least=1)
    materialize_budget_seconds: float = knob("NUDGE_MATERIALIZE_BUDGET_SECONDS", 780, positive=True)
    materialize_slice_users: int = knob("NUDGE_MATERIALIZE_SLICE_USERS", 250, at_least=1)
    materialize_slice_lease: timedelta = knob(
        "NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS", 180, seconds, positive=True
    )
    # --- health ---
    overdue_after: timedelta = knob("NUDGE_HEALTH_OVERDUE_SECONDS", 120, seconds)
    max_p95_lateness: timedelta = knob("NUDGE_HEALTH_MAX_P95_LATENESS_SECONDS", 60, seconds)
    deliver_stale_after: timedelta = knob("NUDGE_HEALTH_DELIVER_STALE_MINUTES", 5, minutes)
    materialize_stale_after: timedelta = knob("NUDGE_HEALTH_MATERIALIZE_STALE_MINUTES", 45, minutes)
    # --- calendars ---
    calendar_http_timeout_seconds: float = knob(
        "CALENDAR_HTTP_TIMEOUT_SECONDS", 15.0, positive=True
    )
    calendar_sync_budget_seconds: float = knob("CALENDAR_SYNC_BUDGET_SECONDS", 60.0, positive=True)
    calendar_sync_user_budget_seconds: float = knob(
        "CALENDAR_SYNC_USER_BUDGET_SECONDS", 120.0, positive=True
    )
    ics_max_bytes: int = knob("ICS_MAX_BYTES", 5 * 1024 * 1024, at_least=1)
    meeting_hosts: tuple[str, ...] = knob(
        "CALENDAR_MEETING_HOSTS", DEFAULT_MEETING_HOSTS, host_list
    )
    calendar_sync_concurrency: int = knob("CALENDAR_SYNC_CONCURRENCY", 64, at_least=1, at_most=512)
    calendar_sync_per_host: int = knob("CALENDAR_SYNC_PER_HOST", 16, at_least=1)
    calendar_sync_db_lanes: int = knob("CALENDAR_SYNC_DB_LANES", 6, at_least=1, at_most=64)
    google_project_rate_per_minute: float = knob(
        "CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE", 8000.0, at_least=0
    )
    google_project_burst: int = knob("CALENDAR_GOOGLE_PROJECT_BURST", 1500, at_least=0)
    google_user_rate_per_minute: float = knob(
        "CALENDAR_GOOGLE_USER_RATE_PER_MINUTE", 480.0, at_least=0
    )
    graph_app_rate_per_minute: float = knob(
        "CALENDAR_GRAPH_APP_RATE_PER_MINUTE", 600_000.0, at_least=0
    )
    graph_mailbox_rate_per_minute: float = knob(
        "CALENDAR_GRAPH_MAILBOX_RATE_PER_MINUTE", 800.0, at_least=0
    )
    calendar_push_base_url: str = knob("CALENDAR_PUSH_BASE_URL", "")
    calendar_safety_poll: timedelta = knob(
        "CALENDAR_SAFETY_POLL_MINUTES", 360, minutes, at_least=15, at_most=24 * 60
    )
    # --- the end-user area ---
    link_code_lifetime: timedelta = knob("NUDGE_LINK_CODE_MINUTES", 15, minutes)
    link_code_retention: timedelta = knob("NUDGE_LINK_CODE_RETENTION_HOURS", 24, hours)
    inbound_seen_retention: timedelta = knob("NUDGE_INBOUND_SEEN_DAYS", 90, days, at_least=1)
    max_calendars_per_user: int = knob("NUDGE_MAX_CALENDARS_PER_USER", 10, at_least=1)
    max_follow_ups_per_user: int = knob("NUDGE_MAX_FOLLOW_UPS_PER_USER", 1000, at_least=1)
    max_api_tokens_per_user: int = knob("NUDGE_MAX_API_TOKENS_PER_USER", 10, at_least=1)
    api_requests_per_minute: int = knob("NUDGE_API_REQUESTS_PER_MINUTE", 60, at_least=1)
    snooze: timedelta = knob("NUDGE_SNOOZE_MINUTES", 10, minutes, at_least=1, at_most=24 * 60)
    whatsapp_actions_content_sid: str = knob("TWILIO_ACTIONS_CONTENT_SID", "", public=True)
    # --- sign-in and password reset (portal/signin.py) ---
    signin_failure_limit: int = knob("NUDGE_SIGNIN_FAILURE_LIMIT", 10, at_least=1)
    signin_lockout: timedelta = knob("NUDGE_SIGNIN_LOCKOUT_MINUTES", 15, minutes, positive=True)
    password_resets_per_address_hour: int = knob(
        "NUDGE_PASSWORD_RESET_PER_ADDRESS_HOUR", 3, at_least=1
    )
    password_resets_per_client_hour: int = knob(
        "NUDGE_PASSWORD_RESET_PER_CLIENT_HOUR", 10, at_least=1
    )
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
        return {channel: getattr(self, f"{channel}_rate") for channel in PACED_CHANNELS}

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
        rules = [
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
            # The hourly allowance of WhatsApp codes counts the last hour's codes.
            (
                self.link_code_retention >= max(timedelta(hours=1), self.link_code_lifetime),
                "NUDGE_LINK_CODE_RETENTION_HOURS must be at least 1 and cover "
                "NUDGE_LINK_CODE_MINUTES",
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
        bounds = (knob.problem(getattr(self, knob.attribute)) for knob in KNOBS)
        return [problem for problem in bounds if problem] + [
            message for ok, message in rules if not ok
        ]


KNOBS: tuple[Knob, ...] = tuple(
    dataclasses.replace(f.metadata["knob"], attribute=f.name)
    for f in dataclasses.fields(NudgeConfig)
    if "knob" in f.metadata
)

# The channels whose send rate is a knob of its own (``<channel>_rate``); others are unpaced.
PACED_CHANNELS = ("telegram", "whatsapp", "console")


# Tests and benchmarks change internal tuning in a child process through this
# variable (JSON: {"NUDGE_BATCH_SIZE": 4, …}); it is not an operator setting.
TUNING_VARIABLE = "NUDGE_TUNING"
TUNING_SETTINGS = frozenset(knob.setting for knob in KNOBS if not knob.public)


def knob_settings(
    env: Any, derived: Mapping[str, int | float | str] | None = None
) -> dict[str, int | float | str]:
    """Every knob as a Django setting: public ones read from the environment (``env``),
    the ``derived`` ones as given, the rest at their default unless ``NUDGE_TUNING``
    changes them; the default's type says how a value is read."""
    values = {
        knob.setting: _read_public(env, knob) if knob.public else knob.default for knob in KNOBS
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


def _read_public(env: Any, knob: Knob) -> int | float | str:
    """A public knob from the environment; a value that is not a number is refused with
    the setting's name (one line from ``manage.py``), not a traceback from the cast."""
    kind = type(knob.default)
    try:
        return {float: env.float, int: env.int, str: env.str}[kind](
            knob.setting, default=knob.default
        )
    except ValueError:
        wanted = "a whole number" if kind is int else "a number"
        raise ImproperlyConfigured(
            f"{knob.setting} must be {wanted}, not {env.str(knob.setting)!r}"
        ) from None


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
