"""Issue 22, item 5 and "How it is measured": every message shape in every language,
from the real composer, within each channel's limit, and docs/MESSAGES.md kept true."""

from __future__ import annotations

import os
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from accounts.rules import held_by_quiet_hours
from messaging.messages import LANGUAGES, Shape, compose
from tests.support.message_table import CHANNEL_LIMITS, over_limit, render

DOCS = Path(__file__).resolve().parents[2] / "docs" / "MESSAGES.md"
NOW = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)  # 15:00 in Berlin


def nudge(**overrides):
    values = {
        "kind": "event",
        "title": "Design review",
        "starts_at": NOW + timedelta(minutes=10),
        "now": NOW,
        "tz_name": "Europe/Berlin",
        "valid_until": NOW + timedelta(minutes=25),
        **overrides,
    }
    return compose(**values)


def test_the_generated_table_is_up_to_date():
    """docs/MESSAGES.md is what the composer writes now; after changing the words,
    ``NUDGE_WRITE_MESSAGES=1`` rewrites it."""
    if os.environ.get("NUDGE_WRITE_MESSAGES"):
        DOCS.write_text(render(), encoding="utf-8")
    assert DOCS.read_text(encoding="utf-8") == render(), (
        "docs/MESSAGES.md is out of date: rerun this test with NUDGE_WRITE_MESSAGES=1"
    )


def test_no_shape_in_any_language_is_over_a_channels_limit():
    """At its longest (longest title, longest link allowed) every shape fits
    Telegram's 4,096 and WhatsApp's 1,600 characters."""
    assert CHANNEL_LIMITS == {"telegram": 4096, "whatsapp": 1600}
    assert over_limit() == []


@pytest.mark.parametrize(
    ("language", "starts", "reminder", "fallback"),
    [
        ("en", "Design review starts at 15:10 (in 10 min)", "Reminder: ", "your follow-up"),
        (
            "de",
            "Design review beginnt um 15:10 (in 10 Min.)",
            "Erinnerung: ",
            "deine Wiedervorlage",
        ),
        ("es", "Design review empieza a las 15:10 (en 10 min)", "Recordatorio: ", "tu seguimiento"),
        ("fr", "Design review commence à 15:10 (dans 10 min)", "Rappel : ", "votre suivi"),
        ("pt-br", "Design review começa às 15:10 (em 10 min)", "Lembrete: ", "seu acompanhamento"),
    ],
)
def test_each_language_composes_in_its_own_words(language, starts, reminder, fallback):
    """Issue 22, item 5: the message in the user's language (gettext catalogs)."""
    assert nudge(language=language).text == starts
    follow_up = nudge(language=language, kind="follow_up", title="")
    assert follow_up.text.startswith(reminder + fallback)
    assert follow_up.language == language


def test_every_supported_language_has_its_catalog():
    """No language falls back to English by a missing .mo."""
    english = nudge(language="en").text
    assert all(nudge(language=language).text != english for language in LANGUAGES[1:])


def test_an_unknown_language_reads_english():
    assert nudge(language="xx").text == "Design review starts at 15:10 (in 10 min)"


def test_a_12_hour_clock():
    """Issue 22, item 5: the user's 12/24-hour choice."""
    text = nudge(clock="12h").text
    assert text.replace("\u202f", " ") == "Design review starts at 3:10 PM (in 10 min)"
    assert "15:10" in nudge(clock="24h").text


def test_today_tomorrow_and_the_year_only_when_not_this_year():
    """Today is the time alone; tomorrow says so; a later date is named, with the year
    only when it is another year."""
    tomorrow = nudge(starts_at=datetime(2026, 12, 4, 8, 0, tzinfo=UTC)).text
    assert tomorrow.startswith("Design review starts tomorrow at 09:00 (in 18 h)")
    later = nudge(starts_at=datetime(2026, 12, 20, 8, 0, tzinfo=UTC)).text
    assert "on Sun, Dec 20 at 09:00" in later and "2026" not in later
    next_year = nudge(starts_at=datetime(2027, 1, 5, 8, 0, tzinfo=UTC), language="de").text
    assert "am Di., 5. Jan. 2027 um 09:00" in next_year


def test_the_link_or_else_the_location_on_the_second_line():
    """What and when on one line; the join link (or else the location) on the next."""
    link = "https://meet.google.com/abc-defg-hij"
    with_both = nudge(join_url=link, location="Room 4").text
    assert with_both.split("\n") == ["Design review starts at 15:10 (in 10 min)", link]
    location = nudge(location="Room 4\n(https://evil.example/x)\u202e").text
    assert location.split("\n") == ["Design review starts at 15:10 (in 10 min)", "Room 4"]
    assert "\n" not in nudge().text


def test_the_snoozed_at_start_and_quiet_hours_shapes():
    """The shapes the other sends need: Snooze's nudge (``shape=Shape.SNOOZED``), one at
    the start itself, and one quiet hours held."""
    assert nudge(shape=Shape.SNOOZED).text.startswith("Snoozed: Design review starts at 15:10")
    assert nudge(starts_at=NOW).text == "Design review starts now (15:00)"
    held = nudge(shape=Shape.QUIET_HOURS, kind="follow_up", title="Call Anna").text
    assert held == "Reminder: Call Anna is due at 15:10 (in 10 min) · held for your quiet hours"


def test_a_nudge_for_the_start_sent_late_says_it_has_begun():
    """A 0-minute reminder delivered late (within grace) does not say "starts now"."""
    late = {"starts_at": NOW - timedelta(minutes=9)}
    assert nudge(**late).text == "Design review started at 14:51 (9 min ago)"
    assert nudge(**late, language="de").text == "Design review hat um 14:51 begonnen (vor 9 Min.)"
    assert nudge(starts_at=NOW - timedelta(seconds=20)).text.endswith("starts now (14:59)")


def test_a_nudge_at_the_end_of_quiet_hours_is_one_they_held():
    """Delivery calls it held (Shape.QUIET_HOURS) when it falls where quiet hours end."""
    quiet = SimpleNamespace(timezone="Europe/Berlin", quiet_start=time(22), quiet_end=time(7))
    assert held_by_quiet_hours(datetime(2026, 12, 4, 6, 0, tzinfo=UTC), quiet)  # 07:00 Berlin
    assert not held_by_quiet_hours(datetime(2026, 12, 4, 6, 10, tzinfo=UTC), quiet)
    assert not held_by_quiet_hours(datetime(2026, 12, 3, 14, 0, tzinfo=UTC), quiet)


@pytest.mark.parametrize(
    ("language", "clock", "starts"),
    [
        ("es", "12h", "Design review empieza mañana a la 1:30 p. m."),
        ("es", "24h", "Design review empieza mañana a las 13:30"),
        ("pt-br", "12h", "Design review começa amanhã à 1:30 PM"),
        ("pt-br", "24h", "Design review começa amanhã às 13:30"),
    ],
)
def test_one_oclock_takes_the_singular_in_spanish_and_portuguese(language, clock, starts):
    """'a la 1:30 p. m.', 'à 1:30 PM' (one o'clock), not 'a las', 'às'; 13:30 is plural."""
    text = nudge(
        language=language, clock=clock, starts_at=datetime(2026, 12, 4, 12, 30, tzinfo=UTC)
    )
    assert text.text.replace("\u202f", " ").startswith(starts)
    one_am = nudge(
        language=language, clock="24h", starts_at=datetime(2026, 12, 4, 0, 30, tzinfo=UTC)
    )
    assert " a la 1:30 " in one_am.text or " à 01:30 " in one_am.text
