"""``docs/MESSAGES.md``: every shape of nudge and every chat answer in every language,
by the real composer. ``NUDGE_WRITE_MESSAGES=1 pytest tests/channels/test_message_table.py``
rewrites it after changing the words; without it the test fails while it is out of date,
or when a shape at its longest is over a limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.utils import translation

from accounts.models import DeliverySettings
from followups.models import FollowUp
from messaging import chat_words as words
from messaging.channels.base import NudgeMessage
from messaging.messages import (
    LANGUAGES,
    MAX_TITLE_CHARS,
    Shape,
    compose,
    compose_agenda,
)
from messaging.telegram.send import keyboard
from providers.meeting_links import MAX_URL_LENGTH
from scheduled_sends.day import Item

CLOCKS = ("24h", "12h")
# What one message may hold, in characters: Telegram's text, a Twilio WhatsApp body.
CHANNEL_LIMITS = {"telegram": 4096, "whatsapp": 1600}

LANGUAGE_NAMES = {
    "en": "English",
    "de": "Deutsch",
    "es": "Español",
    "fr": "Français",
    "pt-br": "Português (Brasil)",
}

# One fixed afternoon in Berlin, so the table never changes by itself.
NOW = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
ZONE = "Europe/Berlin"
MEET = "https://meet.google.com/abc-defg-hij"
ROOM = "Room 4.2, Main building"


@dataclass(frozen=True)
class Example:
    """One shape: what the composer is given besides language and clock."""

    name: str
    kind: str
    title: str
    starts_in: timedelta
    join_url: str = ""
    location: str = ""
    shape: Shape = Shape.REMINDER
    composed_at: datetime = NOW


EXAMPLES = (
    Example("event with link", "event", "Design review", timedelta(minutes=10), join_url=MEET),
    Example("event with location", "event", "Design review", timedelta(minutes=10), location=ROOM),
    Example("follow-up", "follow_up", "Send the proposal", timedelta(minutes=10)),
    Example(
        "snoozed",
        "event",
        "Design review",
        timedelta(minutes=5),
        join_url=MEET,
        shape=Shape.SNOOZED,
    ),
    Example("at start", "event", "Design review", timedelta(0), join_url=MEET),
    # Delivered late, within grace: the 0-minute reminder after the start.
    Example("at start, sent late", "event", "Design review", -timedelta(minutes=5), join_url=MEET),
    # Quiet hours until 07:00 held the 60-minute nudge for the 07:30 standup (Berlin).
    Example(
        "quiet-hours-moved",
        "event",
        "Standup",
        timedelta(minutes=30),
        location=ROOM,
        shape=Shape.QUIET_HOURS,
        composed_at=datetime(2026, 12, 4, 6, 0, tzinfo=UTC),
    ),
    Example("next year", "event", "Planning", timedelta(days=30), location=ROOM),
)


PHISHING_TITLE = "Payroll: confirm your bank details at https://evil.example/login"
PHISHING_PLACE = "Dial in: zoom-us.evil.example/j/123 or bit.ly/x9"
FROM_STRANGERS = (
    Example(
        "invitation, no join link",
        "event",
        PHISHING_TITLE,
        timedelta(minutes=10),
        location=PHISHING_PLACE,
    ),
    Example(
        "invitation with a join link",
        "event",
        PHISHING_PLACE,
        timedelta(minutes=10),
        join_url=MEET,
    ),
    Example(
        "your own follow-up",
        "follow_up",
        "Pay the rent at https://bank.example/pay",
        timedelta(minutes=10),
    ),
)


def message(example: Example, language: str, clock: str, *, longest: bool = False) -> NudgeMessage:
    """The composer's message for ``example``; ``longest``: with the longest title and link."""
    title, join_url = example.title, example.join_url
    if longest:
        title = "W" * (MAX_TITLE_CHARS + 10)
        if join_url:
            join_url = "https://meet.google.com/" + "x" * (MAX_URL_LENGTH - 24)
    starts_at = example.composed_at + example.starts_in
    return compose(
        kind=example.kind,
        title=title,
        starts_at=starts_at,
        now=example.composed_at,
        tz_name=ZONE,
        valid_until=starts_at + timedelta(minutes=15),
        language=language,
        clock=clock,
        join_url=join_url,
        location=example.location,
        shape=example.shape,
    )


def over_limit() -> list[str]:
    """Every shape, language and clock whose longest message a channel would refuse."""
    problems = []
    for example in EXAMPLES:
        for language in LANGUAGES:
            for clock in CLOCKS:
                length = len(message(example, language, clock, longest=True).text)
                for channel, limit in CHANNEL_LIMITS.items():
                    if length > limit:
                        problems.append(
                            f"{example.name} ({language}, {clock}): {length} > {channel} {limit}"
                        )
    return problems


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def render() -> str:
    """docs/MESSAGES.md, as the composer writes today."""
    limits = ", ".join(f"{name} {limit:,}" for name, limit in CHANNEL_LIMITS.items())
    longest = max(
        len(message(example, language, clock, longest=True).text)
        for example in EXAMPLES
        for language in LANGUAGES
        for clock in CLOCKS
    )
    lines = [
        "# Messages",
        "",
        "Every shape of nudge in every language, as `messaging/messages.py` composes it.",
        "Generated by `tests/support/message_table.py` "
        "(`NUDGE_WRITE_MESSAGES=1 pytest tests/channels/test_message_table.py`); "
        "`tests/channels/test_message_table.py` fails when this file is out of date. "
        "Do not edit it by hand.",
        "",
        f"The examples are composed at {NOW:%Y-%m-%d %H:%M} UTC (the quiet-hours one the next "
        f"morning) for a reader in {ZONE}. "
        "A nudge is at most two lines: what and when, then the meeting's link or, without "
        "one, where it is. Limits per message: "
        f"{limits} characters; the longest any shape can be (a {MAX_TITLE_CHARS}-character "
        f"title and a {MAX_URL_LENGTH:,}-character link) is {longest:,}.",
        "",
        "| shape | language | 24-hour clock | 12-hour clock | characters |",
        "|---|---|---|---|---|",
    ]
    for example in EXAMPLES:
        for language in LANGUAGES:
            h24 = message(example, language, "24h").text
            h12 = message(example, language, "12h").text
            lines.append(
                f"| {example.name} | {LANGUAGE_NAMES[language]} | {_cell(h24)} | {_cell(h12)} "
                f"| {len(h24)} |"
            )
    lines += _from_strangers()
    lines += _chat()
    return "\n".join(lines) + "\n"


def _buttons(nudge: NudgeMessage) -> str:
    """The Telegram message's link buttons, as its sender makes them."""
    markup = keyboard("0", nudge)
    rows = markup.inline_keyboard if markup else ()
    links = [f"[{b.text} → {b.url}]" for row in rows for b in row if b.url]
    return "<br>" + " ".join(links) if links else ""


def _from_strangers() -> list[str]:
    """The section on text from invitations: what each channel is sent."""
    lines = [
        "",
        "## Text from an invitation",
        "",
        "Anyone can invite you, so an event's title and place are a stranger's words, and "
        "Telegram and WhatsApp turn any address in a message — with a scheme, `www.` or a "
        "bare domain — into a link. In an event's title and location every address is "
        "defanged: the scheme is dropped and each dot of the host is written `[.]`, so the "
        "reader sees where it points and no app makes it a link. The join link (https, an "
        "allowed meeting host) stays the one link: the message's second line and "
        "Telegram's *Join* button. A follow-up is the person's own words and keeps its "
        "text. The examples: an invitation titled "
        f"“{PHISHING_TITLE}” at “{PHISHING_PLACE}”, one titled with that place and "
        "carrying a Meet link, and a follow-up with its own link.",
        "",
        "| example | language | Telegram: the message, its link buttons "
        "| WhatsApp: the body (with a template, `{{1}}`) |",
        "|---|---|---|---|",
    ]
    for example in FROM_STRANGERS:
        for language in LANGUAGES:
            nudge = message(example, language, "24h")
            telegram = _cell(nudge.text) + _buttons(nudge)
            whatsapp = f"{_cell(nudge.text)}<br>`{{{{1}}}}`: {_cell(nudge.title)}"
            lines.append(
                f"| {example.name} | {LANGUAGE_NAMES[language]} | {telegram} | {whatsapp} |"
            )
    return lines


CHAT_ADDRESS = "0"  # the tokens are not shown; any address signs them


def _chat_rows() -> list[tuple[str, str, words.Answer]]:
    """(example, clock, the answer) for one language (the active one)."""
    local = NOW.astimezone(ZoneInfo(ZONE))
    tomorrow_nine = local.replace(hour=9, minute=0) + timedelta(days=1)
    items = [
        Item("event", 1, local.replace(hour=16, minute=0), "Design review", MEET),
        Item("follow_up", 2, local.replace(hour=18, minute=30), "Send the proposal"),
    ]
    choices = (local.replace(hour=21, minute=0), tomorrow_nine)
    captured = FollowUp(pk=1, title="call Anna", due_at=tomorrow_nine)
    rows: list[tuple[str, str, words.Answer]] = []
    for clock in CLOCKS:
        reader = DeliverySettings(timezone=ZONE, language=translation.get_language(), clock=clock)
        rows += [
            (
                "capture saved",
                clock,
                words.saved(reader, CHAT_ADDRESS, captured, NOW),
            ),
            ("ask-back", clock, words.asked(reader, CHAT_ADDRESS, 1, "call Anna", choices, NOW)),
            ("/next", clock, words.next_up(reader, items, NOW)),
            ("/today", clock, words.today(reader, items, NOW)),
        ]
        agenda = compose_agenda(
            items,
            day=local.date(),
            now=NOW,
            tz_name=ZONE,
            valid_until=NOW + timedelta(minutes=5),
            language=reader.language,
            clock=clock,
        )
        links = tuple(words.Button(label, url=url) for label, url in agenda.links)
        rows.append(("morning agenda", clock, words.Answer(agenda.text, buttons=links)))
    rows.append(("no time given", "", words.Answer(str(words.NO_TIME))))
    return rows


def _chat() -> list[str]:
    """The chat's answers, as Telegram shows them (text, buttons) and as WhatsApp sends
    them (text and the words to reply), by the functions the chat and delivery use."""
    lines = [
        "",
        "## The chat",
        "",
        "What the bot answers in a linked chat (`messaging/chat_words.py`), composed at the "
        "same instant for the same reader: a capture (“tomorrow at 9 call Anna”), an "
        "ask-back (“at 9 call Anna” at 15:00), /next and /today with an event that has a "
        "Meet link and a follow-up, the morning agenda of that day, and the answer to a "
        "reminder without a time. Telegram shows the buttons; WhatsApp sends the text and "
        "the words to reply instead.",
        "",
        "| answer | language | clock | Telegram: text [buttons] | WhatsApp |",
        "|---|---|---|---|---|",
    ]
    for language in LANGUAGES:
        with translation.override(language):
            for name, clock, answer in _chat_rows():
                buttons = " ".join(f"[{b.label}]" for b in answer.buttons)
                telegram = _cell(answer.text) + (f"<br>{buttons}" if buttons else "")
                lines.append(
                    f"| {name} | {LANGUAGE_NAMES[language]} | {clock or 'both'} | {telegram} "
                    f"| {_cell(answer.for_whatsapp())} |"
                )
    return lines
