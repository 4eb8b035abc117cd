"""Titles come from calendars anyone can invite you to: plain text, bounded, never markup."""

from __future__ import annotations

import unicodedata
from datetime import timedelta

import pytest

from messaging.messages import ELLIPSIS, MAX_TITLE_CHARS, clean_title, compose
from sweeps.deliver import run_deliver
from tests.channels.queue import queue_follow_up, reload
from tests.conftest import utc

NOW = utc(2026, 12, 2, 14, 50)
START = utc(2026, 12, 2, 15, 0)
FAMILY = "👩\u200d👩\u200d👧\u200d👦"
FLAG = "🇩🇪"
MARKUP = "<b>bold</b> *star* _under_ ~strike~ `code` ```pre``` [link](http://x) &amp; <script>"


def message(title: str, kind: str = "event", tz: str = "UTC"):
    return compose(
        kind=kind,
        title=title,
        starts_at=START,
        now=NOW,
        tz_name=tz,
        valid_until=NOW + timedelta(minutes=15),
    )


def assert_whole_characters(cut: str, original: str) -> None:
    """``cut`` (without its ellipsis) ends on a character boundary of ``original``."""
    body = cut.removesuffix(ELLIPSIS).rstrip()
    assert original.startswith(body)
    rest = original[len(body) :]
    if rest:
        nxt = rest[0]
        assert unicodedata.category(nxt) not in {"Mn", "Me", "Mc"}, repr(nxt)
        assert nxt not in "\u200d\ufe0f" and not "\U0001f3fb" <= nxt <= "\U0001f3ff"
    assert not body.endswith("\u200d")
    trailing_flags = len(body) - len(body.rstrip("".join(chr(c) for c in range(0x1F1E6, 0x1F200))))
    assert trailing_flags % 2 == 0


def test_markup_is_passed_through_as_plain_text():
    """Markup is text; in an event's title its link also loses its scheme (issue 34
    finding 4: tests/security/test_strangers_links.py)."""
    nudge = message(MARKUP, kind="follow_up")
    assert nudge.text == f"Reminder: {MARKUP} is due at 15:00 (in 10 min)"
    assert nudge.title == MARKUP
    event = message(MARKUP)
    plain = MARKUP.replace("[link](http://x)", "[link](x)")
    assert event.text == f"{plain} starts at 15:00 (in 10 min)"
    assert event.title == plain


@pytest.mark.parametrize(
    "title",
    [
        "Design review " * 800,  # ~11,000 characters with spaces
        "x" * 10_000,  # one enormous word
        "ש" * 10_000,  # right-to-left, no spaces
        "🎉" * 10_000,  # astral plane
    ],
)
def test_a_10000_character_title_is_cut_to_a_bounded_line(title):
    nudge = message(title)
    assert len(nudge.title) <= MAX_TITLE_CHARS
    assert nudge.title.endswith(ELLIPSIS)
    assert len(nudge.text) < MAX_TITLE_CHARS + 40
    assert nudge.text.encode("utf-8")
    assert_whole_characters(nudge.title, " ".join(title.split()))


def test_a_long_title_is_cut_at_a_word_boundary():
    title = "Quarterly planning with the extended leadership team " * 10
    cut = clean_title(title, "x")
    assert cut.endswith(ELLIPSIS)
    assert title.startswith(cut[:-1]) and title[len(cut) - 1] == " "


@pytest.mark.parametrize(
    "tail",
    [
        FAMILY * 20,  # ZWJ sequences
        FLAG * 70,  # flags are two regional indicators each
        "e\u0301\u0323" * 60,  # a letter with two combining marks
        "👍🏽" * 60,  # skin-tone modifiers
        "❤\ufe0f" * 70,  # variation selectors
        "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f" * 20,  # Scotland
    ],
)
@pytest.mark.parametrize("offset", range(0, 8))
def test_truncation_never_splits_a_character(tail, offset):
    title = "a" * (60 + offset) + tail  # no space: the cut falls inside the sequences
    cut = clean_title(title, "x")
    assert len(cut) <= MAX_TITLE_CHARS and cut.endswith(ELLIPSIS)
    assert_whole_characters(cut, title)


def test_right_to_left_text_and_emoji_pass_through_untouched():
    title = "פגישה עם דנה 🎉 اجتماع " + FAMILY + " " + FLAG
    assert message(title).title == title


@pytest.mark.parametrize("control", list("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))
def test_directional_overrides_cannot_reorder_the_rest_of_the_message(control):
    nudge = message(f"Pay {control}invoice now")
    assert control not in nudge.text
    assert nudge.text == "Pay invoice now starts at 15:00 (in 10 min)"


def test_control_characters_cannot_add_lines_or_escape_sequences():
    nudge = message("Line one\nLine two\r\n\tTabbed\x00nul\x1b[31mred\x07\u2028\u2029 end")
    assert "\n" not in nudge.text and "\r" not in nudge.text and "\x1b" not in nudge.text
    assert all(unicodedata.category(c) not in {"Cc", "Zl", "Zp"} for c in nudge.text)
    assert nudge.title == "Line one Line two Tabbed nul [31mred end"


def test_lone_surrogates_are_dropped_so_the_text_can_be_sent():
    nudge = message("Broken \ud83d emoji \udc4d here")
    nudge.text.encode("utf-8")  # would raise UnicodeEncodeError at the provider
    assert nudge.title == "Broken emoji here"


@pytest.mark.parametrize("title", ["", "   ", "\n\t\x00", "\u202e\u2066", "\ud800"])
def test_a_title_of_nothing_visible_falls_back(title):
    assert message(title).title == "Your event"
    assert message(title, kind="follow_up").text.startswith("Reminder: your follow-up is due")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "", "UTC\x00"])
def test_an_unknown_time_zone_still_sends_and_says_utc(zone, caplog):
    nudge = message("Standup", tz=zone)
    assert nudge.text == "Standup starts at 15:00 UTC (in 10 min)"
    assert "unknown time zone" in caplog.text


@pytest.mark.django_db
def test_a_hostile_title_reaches_both_providers_as_plain_text(
    make_user, twilio_settings, telegram_settings, fake_twilio, fake_telegram
):
    # The longest title the column holds (calendar sync cuts there; compose cuts further).
    title = ("\u202e" + MARKUP + " 🎉 פגישה " + "long " * 2000)[:1024]
    telegram_user = make_user(channel="telegram", telegram_chat_id="4242")
    whatsapp_user = make_user(channel="whatsapp", whatsapp_number="+14155550123")
    now = NOW
    rows = [queue_follow_up(user, title, now=now) for user in (telegram_user, whatsapp_user)]
    report = run_deliver(now)
    assert report.sent == 2, report.summary()
    expected = message(title, kind="follow_up").title
    [telegram_send] = fake_telegram.delivered
    [whatsapp_send] = fake_twilio.delivered
    for delivered in (telegram_send, whatsapp_send):
        assert expected in delivered.text
        assert "\u202e" not in delivered.text
        assert len(delivered.text) < MAX_TITLE_CHARS + 60
    # Telegram: no parse mode, no entities: the markup is characters, not formatting.
    sent = fake_telegram.calls("sendMessage")[-1].params
    assert "parse_mode" not in sent and "entities" not in sent
    assert {reload(row).outcome for row in rows} == {"sent"}
