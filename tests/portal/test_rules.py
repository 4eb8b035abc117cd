"""Quiet hours and holds as pure functions: no database, just the rules."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

import pytest

from accounts.rules import SkipReason, hold_for_quiet_hours, pause_reason, quiet_hours_end


@dataclass
class Prefs:
    timezone: str = "Europe/Berlin"
    quiet_start: time | None = time(22, 0)
    quiet_end: time | None = time(7, 0)
    channel: str = "telegram"
    paused: bool = False
    paused_reason: str = ""
    unreachable_channel: str = ""
    unreachable_reason: str = ""


def berlin(day: int, hour: int, minute: int = 0) -> datetime:
    # December: Berlin is UTC+1.
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC) - timedelta(hours=1)


def test_outside_quiet_hours_nothing_moves():
    fire = berlin(3, 12)
    assert hold_for_quiet_hours(fire, fire + timedelta(minutes=10), Prefs()) == fire


def test_late_evening_nudge_is_held_to_the_morning_when_its_subject_is_later():
    fire = berlin(3, 23, 30)
    assert hold_for_quiet_hours(fire, berlin(4, 9), Prefs()) == berlin(4, 7)


def test_after_midnight_inside_the_wrapped_window_ends_the_same_morning():
    fire = berlin(4, 2)
    assert hold_for_quiet_hours(fire, berlin(4, 8), Prefs()) == berlin(4, 7)


def test_a_nudge_whose_subject_starts_before_quiet_hours_end_is_skipped_with_a_reason():
    fire = berlin(3, 23, 30)
    held = hold_for_quiet_hours(fire, berlin(3, 23, 40), Prefs())
    assert held == SkipReason("quiet hours until 07:00, and it starts before they end")


def test_start_is_inside_and_end_is_outside():
    prefs = Prefs()
    assert quiet_hours_end(berlin(3, 22), prefs) == berlin(4, 7)
    assert quiet_hours_end(berlin(4, 7), prefs) is None


def test_a_daytime_window_that_does_not_wrap():
    prefs = Prefs(quiet_start=time(12, 0), quiet_end=time(13, 30))
    assert hold_for_quiet_hours(berlin(3, 12, 15), berlin(3, 15), prefs) == berlin(3, 13, 30)
    assert hold_for_quiet_hours(berlin(3, 11, 59), berlin(3, 15), prefs) == berlin(3, 11, 59)


@pytest.mark.parametrize("start,end", [(None, None), (time(8), time(8)), (time(8), None)])
def test_no_or_empty_quiet_hours_hold_nothing(start, end):
    fire = berlin(3, 8)
    assert hold_for_quiet_hours(fire, fire + timedelta(hours=1), Prefs(None, start, end)) == fire


def test_quiet_hours_follow_the_users_zone_not_utc():
    prefs = Prefs(timezone="America/New_York")
    # 23:30 in Berlin is 17:30 in New York: not quiet there.
    fire = berlin(3, 23, 30)
    assert hold_for_quiet_hours(fire, fire + timedelta(hours=1), prefs) == fire


def test_the_end_is_found_across_a_daylight_saving_change():
    prefs = Prefs()
    # The night of 28-29 March 2026 Berlin moves from UTC+1 to UTC+2.
    fire = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # 00:00 local, inside
    assert quiet_hours_end(fire, prefs) == datetime(2026, 3, 29, 5, 0, tzinfo=UTC)  # 07:00 CEST


def test_pause_and_unreachable_hold_with_a_readable_reason():
    assert pause_reason(Prefs()) is None
    assert pause_reason(Prefs(paused=True, paused_reason="you paused nudges")) == SkipReason(
        "nudges paused: you paused nudges"
    )
    blocked = Prefs(unreachable_channel="telegram", unreachable_reason="you blocked the bot")
    assert pause_reason(blocked) == SkipReason("telegram unreachable: you blocked the bot")
    # Unreachable on a channel the user no longer uses holds nothing.
    assert pause_reason(Prefs(channel="whatsapp", unreachable_channel="telegram")) is None
