"""Whether and when a nudge may go out for a user (pause, unreachable, quiet hours), and the
language and clock a new user starts with: pure, so materialize and delivery agree."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Protocol

from babel import Locale, UnknownLocaleError
from django.utils.translation import get_supported_language_variant, gettext
from django.utils.translation.trans_real import parse_accept_lang_header

from core.deployment import NOT_IN_PRODUCTION, console_channel_allowed
from core.zones import zone_of

NOT_SET_UP = "no channel set up yet: link Telegram or WhatsApp in Settings"


class HoldSettings(Protocol):
    """The fields of ``DeliverySettings`` these rules read."""

    channel: str
    paused: bool
    paused_reason: str
    unreachable_channel: str
    unreachable_reason: str
    timezone: str
    quiet_start: time | None
    quiet_end: time | None


@dataclass(frozen=True)
class SkipReason:
    """Why a nudge is not sent, in words the user reads in their history."""

    reason: str


def pause_reason(settings: HoldSettings) -> SkipReason | None:
    """Nudges are held while the user paused them, has no channel yet (or only the
    development console outside development), or their channel is unreachable."""
    if not settings.channel:
        return SkipReason(NOT_SET_UP)
    if settings.channel == "console" and not console_channel_allowed():
        return SkipReason(NOT_IN_PRODUCTION)
    if settings.paused:
        return SkipReason(f"nudges paused: {settings.paused_reason or 'paused by you'}")
    if settings.unreachable_channel and settings.unreachable_channel == settings.channel:
        return SkipReason(
            f"{settings.channel} unreachable: {settings.unreachable_reason or 'relink it'}"
        )
    return None


def quiet_hours_problem(start: time | None, end: time | None) -> str | None:
    """Why a pair of quiet hours cannot be saved, in a sentence; None when it can.
    Equal ends would silently mean "none", so they are refused."""
    if (start is None) != (end is None):
        return gettext("Give both ends of the quiet hours, or neither.")
    if start is not None and start == end:
        return gettext(
            "Quiet hours need an end different from their start "
            "(for example 22:00 until 07:00). Leave both empty for none."
        )
    return None


def quiet_hours_end(moment: datetime, settings: HoldSettings) -> datetime | None:
    """The end of the quiet period ``moment`` falls in, or None. Quiet hours are wall-clock
    times in the user's zone and may wrap midnight; start is inside, end is not."""
    start, end = settings.quiet_start, settings.quiet_end
    if start is None or end is None or start == end:
        return None
    zone = zone_of(settings.timezone)
    local = moment.astimezone(zone)
    clock = local.time().replace(tzinfo=None)
    if start < end:
        inside = start <= clock < end
        end_day = local.date()
    else:  # wraps midnight
        inside = clock >= start or clock < end
        end_day = local.date() + timedelta(days=1) if clock >= start else local.date()
    if not inside:
        return None
    # A wall time that does not exist (DST gap) resolves forward through fold handling.
    ends = datetime.combine(end_day, end, tzinfo=zone)
    return ends.astimezone(UTC)


def hold_for_quiet_hours(
    fire_at: datetime, starts_at: datetime, settings: HoldSettings
) -> datetime | SkipReason:
    """When the nudge planned for ``fire_at`` may go: unchanged outside quiet hours,
    held to their end when its subject is still ahead then, otherwise skipped."""
    ends = quiet_hours_end(fire_at, settings)
    if ends is None:
        return fire_at
    if ends < starts_at:
        return ends
    local_end = ends.astimezone(zone_of(settings.timezone))
    return SkipReason(f"quiet hours until {local_end:%H:%M}, and it starts before they end")


def held_by_quiet_hours(intended_at: datetime, settings: HoldSettings) -> bool:
    """Whether quiet hours held back a nudge to ``intended_at`` (it falls exactly where
    a quiet period ends), so the message can say why it comes with less notice."""
    just_before = intended_at - timedelta(seconds=1)
    return quiet_hours_end(just_before, settings) == intended_at


_QUOTED = re.compile(r"'[^']*'")


def _clock_of(tag: str) -> str:
    """ "12h" where the browser's locale writes times with a 12-hour clock (en-US, es-MX)."""
    for candidate in (tag, tag.split("-", 1)[0]):
        try:
            pattern = Locale.parse(candidate, sep="-").time_formats["short"].pattern
        except (UnknownLocaleError, ValueError, TypeError, KeyError):
            continue
        letters = _QUOTED.sub("", pattern)
        return "12h" if "h" in letters or "K" in letters else "24h"
    return "24h"


def preferences_for(accept_language: str) -> dict[str, str]:
    """A new person's ``language`` and ``clock`` from Accept-Language: the first
    supported language and its region's clock; empty when none is supported."""
    for tag, _quality in parse_accept_lang_header(accept_language[:500]):
        if tag == "*":
            continue
        try:  # the tag, its family ("de" for de-AT), or a sibling ("pt-br" for pt-PT)
            language = get_supported_language_variant(tag)
        except LookupError:
            continue
        return {"language": language, "clock": _clock_of(tag)}
    return {}
