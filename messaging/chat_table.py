"""``docs/MESSAGES.md``'s section on the chat: a capture's confirmation, an ask-back,
the answer without a time, /next, /today and the morning agenda, in every language
and on both clocks, by the same functions the chat and delivery use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.utils import translation

from messaging import chat_words as words
from messaging.messages import CLOCKS, LANGUAGES, compose_agenda
from scheduled_sends.day import Item

CHAT_ADDRESS = "0"  # the tokens are not shown; any address signs them


@dataclass(frozen=True)
class Reader:
    timezone: str
    language: str
    clock: str


def _buttons(answer: words.Answer) -> str:
    return " ".join(f"[{b.label}]" for b in answer.buttons)


def _rows(now: datetime, zone: str, meet: str) -> list[tuple[str, str, words.Answer | str]]:
    """(example, clock, the answer) for one language (the active one)."""
    local = now.astimezone(ZoneInfo(zone))
    tomorrow_nine = local.replace(hour=9, minute=0) + timedelta(days=1)
    items = [
        Item("event", 1, local.replace(hour=16, minute=0), "Design review", meet),
        Item("follow_up", 2, local.replace(hour=18, minute=30), "Send the proposal"),
    ]
    choices = (local.replace(hour=21, minute=0), tomorrow_nine)
    rows: list[tuple[str, str, words.Answer | str]] = []
    for clock in CLOCKS:
        reader = Reader(zone, translation.get_language(), clock)
        rows += [
            (
                "capture saved",
                clock,
                words.saved(reader, CHAT_ADDRESS, 1, "call Anna", tomorrow_nine, now),
            ),
            ("ask-back", clock, words.asked(reader, CHAT_ADDRESS, 1, "call Anna", choices, now)),
            ("/next", clock, words.next_up(reader, items, now)),
            ("/today", clock, words.today(reader, items, now)),
        ]
        agenda = compose_agenda(
            items,
            day=local.date(),
            now=now,
            tz_name=zone,
            valid_until=now + timedelta(minutes=5),
            language=reader.language,
            clock=clock,
        )
        links = tuple(words.Button(label, url=url) for label, url in agenda.links)
        rows.append(("morning agenda", clock, words.Answer(agenda.text, buttons=links)))
    rows.append(("no time given", "", words.Answer(str(words.NO_TIME))))
    return rows


def section(now: datetime, zone: str, meet: str, names: dict[str, str], cell) -> list[str]:
    """The section's lines: each answer as Telegram shows it (text, buttons) and as
    WhatsApp sends it (text and the words to reply)."""
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
            for name, clock, answer in _rows(now, zone, meet):
                telegram = cell(answer.text) + (f"<br>{_buttons(answer)}" if answer.buttons else "")
                lines.append(
                    f"| {name} | {names[language]} | {clock or 'both'} | {telegram} "
                    f"| {cell(answer.for_whatsapp())} |"
                )
    return lines
