"""The chat's words and buttons, pure: what ``messaging.chat`` answers, in the active
language and the reader's (their ``DeliverySettings``') zone and clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext, gettext_lazy

from followups.capture import fold
from messaging import action_tokens
from messaging.messages import (
    JOIN_LABEL_TITLE_CHARS,
    all_day_text,
    clean_title,
    clock_text,
    one_message,
    shorten,
    when_text,
)
from scheduled_sends.day import Item

MAX_CHOICES = 4

# What the person reads (the owner's language is active when these are formatted).
SAVED = gettext_lazy("Saved: “{title}” {when}.")
MOVED = gettext_lazy("Moved: “{title}” {when}.")
UNDONE = gettext_lazy("Undone: “{title}” is deleted.")
NOTHING_TO_UNDO = gettext_lazy("There is nothing to undo.")
NOT_SAVED = gettext_lazy("Not saved: {reason}")
TOO_MANY = gettext_lazy("Not saved: that is {count} captures in the last hour. Try again later.")
ASK = gettext_lazy("When exactly, for “{title}”?")
ASK_REPLY = gettext_lazy("Reply with the number.")
NO_TIME = gettext_lazy(
    "When should I remind you? Write it with a time, for example: "
    "“tomorrow at 9 call Anna” or “in 2 hours check the oven”."
)
UNDO_HINT = gettext_lazy("Reply “undo” to delete it, or send a new time to change it.")
NEW_TIME = gettext_lazy("Send the new time, for example “tomorrow at 10”.")
NEXT = gettext_lazy("Next: {title} {when}")
NOTHING_NEXT = gettext_lazy("Nothing in the next 7 days.")
TODAY = gettext_lazy("Today:")
NOTHING_TODAY = gettext_lazy("Nothing more today.")
NOT_CONSENTING = gettext_lazy("This chat's nudges are stopped. Send /start to turn them on.")
HELP = gettext_lazy(
    "Write what and when, for example “tomorrow at 9 call Anna”, and I will remind you.\n"
    "/next: what comes next\n"
    "/today: the rest of today\n"
    "/remind: remind me (/remind in 2 hours check the oven)\n"
    "/agenda 7:30: your day's list each morning (/agenda off: none)\n"
    "/stop: no more nudges here, /start: nudges again"
)
AGENDA_SET = gettext_lazy("Your agenda will come each day {when}.")
AGENDA_OFF = gettext_lazy("No more agenda.")
AGENDA_HOW = gettext_lazy("Send “/agenda 7:30” for a daily agenda at 7:30, or “/agenda off”.")
UNDO_BUTTON = gettext_lazy("Undo")
CHANGE_BUTTON = gettext_lazy("Change time")
JOIN_BUTTON = gettext_lazy("Join")
DEFAULT_TITLE = gettext_lazy("Reminder")
NOT_HERE = gettext_lazy("This button does not belong to this chat")

# Typed replies, the whole message (any case, accents or not, a trailing "." or "!"
# ignored), and what each asks: WhatsApp's opt-out keywords, a nudge's Snooze / Done in
# the five languages (the buttons' own words among them: "später", "Erledigt", "Posponer",
# "Hecho", "Reporter", "Fait", "Adiar", "Concluído"), a capture's Undo. None is a word
# of another language's other act ("pronto" is "done" in Brazil and "soon" in Spain).
_SNOOZE_WORDS = """snooze|later|später|schlummern|posponer|aplazar|más tarde|reporter|plus tard|
    adiar|mais tarde|soneca"""
_DONE_WORDS = "done|done ✓|erledigt|fertig|hecho|listo|fait|fini|terminé|concluído|feito"
REPLY_WORDS = {
    fold(word.strip()): act
    for words, act in (
        (("stop", "stopall", "unsubscribe", "cancel", "end", "quit", "optout"), "stop"),
        (("start", "yes", "unstop", "optin"), "start"),
        (_SNOOZE_WORDS.split("|"), "snooze"),
        (_DONE_WORDS.split("|"), "done"),
        (("undo", "rückgängig", "deshacer", "annuler", "desfazer"), "undo"),
    )
    for word in words
}

# The Telegram command menu (setMyCommands), each described in each language.
MENU = (
    ("next", gettext_lazy("What comes next")),
    ("today", gettext_lazy("The rest of today")),
    ("remind", gettext_lazy("Remind me: /remind tomorrow at 9 call Anna")),
    ("agenda", gettext_lazy("A daily agenda: /agenda 7:30, or /agenda off")),
    ("help", gettext_lazy("What I can do")),
    ("stop", gettext_lazy("No more nudges here")),
)


def reply_word(text: str) -> str | None:
    """What a typed reply that is one of ``REPLY_WORDS`` asks ("stop", "snooze", "undo"…)."""
    return REPLY_WORDS.get(fold(" ".join(text.split())).rstrip(".!"))


@dataclass(frozen=True)
class Button:
    label: str
    token: str = ""  # a signed act (action_tokens), or
    url: str = ""  # a link (Join)


@dataclass(frozen=True)
class Answer:
    """Telegram shows ``text`` and the buttons; WhatsApp ``text`` and ``reply_words``
    (what to type instead of pressing)."""

    text: str
    buttons: tuple[Button, ...] = ()
    reply_words: str = ""
    changed: bool = False

    def for_whatsapp(self) -> str:
        return f"{self.text}\n{self.reply_words}" if self.reply_words else self.text


def saved(reader: Any, address: str, follow_up: Any, now: datetime, text=SAVED) -> Answer:
    """A capture's confirmation ("Saved: …", or ``text`` such as MOVED) with Undo and
    Change time, signed for ``address``; WhatsApp reads the words to reply instead."""
    sign, pk = action_tokens.sign, follow_up.pk
    return Answer(
        str(text).format(title=follow_up.title, when=when_text(reader, follow_up.due_at, now)),
        buttons=(
            Button(str(UNDO_BUTTON), sign(action_tokens.UNDO, pk, address)),
            Button(str(CHANGE_BUTTON), sign(action_tokens.RETIME, pk, address)),
        ),
        reply_words=str(UNDO_HINT),
        changed=True,
    )


def asked(
    reader: Any, address: str, ask_id: int, title: str, choices: Sequence[datetime], now: datetime
) -> Answer:
    """An ask-back: the choices as buttons, or numbered for a typed reply."""
    labels = [when_text(reader, choice, now) for choice in choices]
    buttons = tuple(
        Button(label, action_tokens.sign(action_tokens.PICK, ask_id * MAX_CHOICES + i, address))
        for i, label in enumerate(labels)
    )
    numbered = "\n".join(f"{i}. {label}" for i, label in enumerate(labels, start=1))
    return Answer(
        str(ASK).format(title=title), buttons=buttons, reply_words=f"{numbered}\n{ASK_REPLY}"
    )


def _title(item: Item) -> str:
    return clean_title(item.title, str(DEFAULT_TITLE), from_a_stranger=item.kind == "event")


def next_up(reader: Any, items: Sequence[Item], now: datetime) -> Answer:
    """/next: the first item, with its join link (a Join button on Telegram)."""
    if not items:
        return Answer(str(NOTHING_NEXT))
    item = items[0]
    when = (all_day_text if item.all_day else when_text)(reader, item.starts_at, now)
    text = str(NEXT).format(title=_title(item), when=when)
    if item.join_url:
        join = Button(str(JOIN_BUTTON), url=item.join_url)
        return Answer(f"{text}\n{item.join_url}", buttons=(join,))
    return Answer(text)


def today(reader: Any, items: Sequence[Item], now: datetime) -> Answer:
    """/today: one line per item left today, its time (or "all day", like the morning
    agenda) then its title; Join buttons."""
    if not items:
        return Answer(str(NOTHING_TODAY))
    item_lines = []
    for item in items:
        when = gettext("all day") if item.all_day else clock_text(reader, item.starts_at, now)
        item_lines.append(f"• {when} {_title(item)}")
    lines, _ = one_message(str(TODAY), item_lines, gettext)
    buttons = tuple(
        Button(f"{JOIN_BUTTON!s}: {shorten(_title(i), JOIN_LABEL_TITLE_CHARS)}", url=i.join_url)
        for i in items
        if i.join_url
    )
    return Answer("\n".join(lines), buttons=buttons[:5])
