"""What a linked chat can ask in words, on Telegram and WhatsApp alike, in its owner's
language: capture a follow-up ("tomorrow at 9 call Anna"), undo or retime it, pick an
ask-back's choice, /next, /today, /agenda, /help. Only a chat whose opt-in stands creates
anything (``followups.actions``, at most ``CAPTURES_PER_HOUR``); chatter gets help hourly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet
from django.utils.translation import override

from accounts.actions import update_settings
from accounts.models import DeliverySettings
from core.config import NudgeConfig
from core.zones import zone_of
from followups import capture
from followups.actions import (
    FollowUpChange,
    FollowUpInvalid,
    change_follow_up,
    create_follow_up,
    delete_follow_up,
    get_follow_up,
)
from messaging import action_tokens, addresses, nudge_actions
from messaging import chat_words as words
from messaging.chat_words import Answer
from messaging.messages import clean_title, when_text
from messaging.models import ChatRecord, OptInRecord
from scheduled_sends.day import end_of_day, items_between
from tenancy.scope import tenant_scope

CAPTURES_PER_HOUR = 20
HELP_EVERY = timedelta(hours=1)
# "undo", a new time, or a number answers the capture or ask-back this recent.
ANSWER_WINDOW = timedelta(minutes=30)
NEXT_HORIZON = timedelta(days=7)
KEEP_RECORDS = timedelta(days=1)

COMMANDS = ("next", "today", "help", "remind", "agenda")
# "/agenda off" in the five languages, accents or not (compared folded).
OFF_WORDS = frozenset(
    "off aus nein no apagar desactivar non desactiver nao desligar desativar".split()
)


@dataclass(frozen=True)
class _Person:
    user_id: int
    channel: str
    address: str
    settings: DeliverySettings


def _person(channel: str, address: str) -> _Person | None:
    """The chat's owner when the chat is linked to them and their opt-in stands."""
    owner = addresses.owner_of(channel, address)
    if owner is None:
        return None
    with tenant_scope(owner):
        settings = DeliverySettings.objects.filter(user_id=owner).first()
        if settings is None or settings.address(channel) != address:
            return None
        consenting = OptInRecord.objects.filter(
            user_id=owner, channel=channel, address=address, withdrawn_at=None
        ).exists()
    return (
        _Person(owner, channel, address, settings)
        if consenting
        else _Person(owner, "", "", settings)
    )


def _record(person: _Person, kind: str, now: datetime, **fields: object) -> ChatRecord:
    """Note what the chat did, inside the person's scope; what is older than every
    window that reads it (the hour's cap, help's hour, an answer's 30 minutes) goes."""
    ChatRecord.objects.filter(user_id=person.user_id, created_at__lt=now - KEEP_RECORDS).delete()
    return ChatRecord.objects.create(
        user_id=person.user_id, kind=kind, channel=person.channel, created_at=now, **fields
    )


def _since(person: _Person, kind: str, since: datetime) -> QuerySet[ChatRecord]:
    return ChatRecord.objects.filter(user_id=person.user_id, kind=kind, created_at__gt=since)


def _latest(person: _Person, kind: str, now: datetime) -> ChatRecord | None:
    """The last record of ``kind`` from this chat that an answer may still refer to."""
    found = _since(person, kind, now - ANSWER_WINDOW).filter(channel=person.channel)
    return found.order_by("-created_at", "-pk").first()


def _create(
    person: _Person, title: str, due_at: datetime, now: datetime, config: NudgeConfig
) -> Answer:
    title = clean_title(title, str(words.DEFAULT_TITLE))
    with tenant_scope(person.user_id):
        count = _since(person, ChatRecord.Kind.CAPTURE, now - timedelta(hours=1)).count()
    if count >= CAPTURES_PER_HOUR:
        return Answer(str(words.TOO_MANY).format(count=count))
    try:
        follow_up = create_follow_up(person.user_id, title, due_at, now, config)
    except FollowUpInvalid as exc:
        return Answer(str(words.NOT_SAVED).format(reason=exc.in_words()))
    with tenant_scope(person.user_id):
        _record(person, ChatRecord.Kind.CAPTURE, now, follow_up_id=follow_up.pk, title=title)
    return words.saved(person.settings, person.address, follow_up, now)


def _retime(person: _Person, follow_up_id: int, due_at: datetime, now: datetime) -> Answer:
    try:
        follow_up = change_follow_up(
            person.user_id, follow_up_id, FollowUpChange(due_at=due_at), now
        )
    except FollowUpInvalid as exc:
        return Answer(str(words.NOT_SAVED).format(reason=exc.in_words()))
    if follow_up is None:
        return Answer(str(words.NOTHING_TO_UNDO))
    return words.saved(person.settings, person.address, follow_up, now, words.MOVED)


def _undo(person: _Person, follow_up_id: int, now: datetime) -> Answer:
    follow_up = get_follow_up(person.user_id, follow_up_id)
    if follow_up is None or not delete_follow_up(person.user_id, follow_up_id, now):
        return Answer(str(words.NOTHING_TO_UNDO))
    return Answer(str(words.UNDONE).format(title=follow_up.title), changed=True)


def _pick(
    person: _Person, record: ChatRecord | None, index: int, now: datetime, config: NudgeConfig
) -> Answer | None:
    if record is None or not 0 <= index < len(record.choices):
        return None
    with tenant_scope(person.user_id):
        taken = ChatRecord.objects.filter(pk=record.pk, kind=ChatRecord.Kind.ASK).delete()[0]
    if not taken:  # a second tap on the same ask-back
        return Answer(str(words.NOTHING_TO_UNDO))
    return _create(person, record.title, record.choices[index], now, config)


def _agenda(person: _Person, rest: str, now: datetime) -> Answer:
    """/agenda 7:30 (or 7h, 19 Uhr, 7:30 pm) sets the daily agenda's time, /agenda off
    (aus, désactiver…) turns it off."""
    if capture.fold(rest).strip(" .!") in OFF_WORDS:
        update_settings(person.user_id, {"agenda_at": None}, now)
        return Answer(str(words.AGENDA_OFF))
    at = capture.read_time(rest)  # the hours a capture reads: "7h", "19 Uhr", "7:30 pm"
    if at is None:
        return Answer(str(words.AGENDA_HOW))
    update_settings(person.user_id, {"agenda_at": at}, now)
    zone = zone_of(person.settings.timezone)
    local = now.astimezone(zone)
    # The next time it comes, as the person's clock writes it.
    next_at = datetime.combine(local.date(), at, tzinfo=zone)
    if next_at <= now:
        next_at = datetime.combine(local.date() + timedelta(days=1), at, tzinfo=zone)
    return Answer(str(words.AGENDA_SET).format(when=when_text(person.settings, next_at, now)))


def _ask(person: _Person, read: capture.AskBack, now: datetime) -> Answer:
    """Record the ask-back's choices (for a tap or a numbered reply), then ask."""
    title = clean_title(read.title, str(words.DEFAULT_TITLE))
    choices = read.choices[: words.MAX_CHOICES]
    with tenant_scope(person.user_id):
        record = _record(person, ChatRecord.Kind.ASK, now, title=title, choices=list(choices))
    return words.asked(person.settings, person.address, record.pk, title, choices, now)


def _help_once_an_hour(person: _Person, now: datetime, text) -> Answer | None:
    with tenant_scope(person.user_id):
        if _since(person, ChatRecord.Kind.HELP, now - HELP_EVERY).exists():
            return None
        _record(person, ChatRecord.Kind.HELP, now)
    return Answer(str(text))


def _command(text: str) -> tuple[str, str]:
    """("next", "") for "/next@nudge_bot" or "Next"; ("", text) for anything else."""
    head, _, rest = text.strip().partition(" ")
    word = head.split("@", 1)[0].lower().lstrip("/")
    if word in COMMANDS and (head.startswith("/") or not rest.strip()):
        return word, rest.strip()
    return "", text.strip()


def _words(person: _Person, text: str, now: datetime, config: NudgeConfig) -> Answer | None:
    command, rest = _command(text)
    if command == "help":
        return Answer(str(words.HELP))
    if command in ("next", "today"):
        zone = zone_of(person.settings.timezone)
        until = end_of_day(now.astimezone(zone).date(), zone)
        show, running = words.today, True
        if command == "next":
            until, show, running = now + NEXT_HORIZON, words.next_up, False
        with tenant_scope(person.user_id):
            items = items_between(person.user_id, now, until, running_all_day=running)
        return show(person.settings, items, now)
    if command == "agenda":
        return _agenda(person, rest, now)
    if command == "remind" and not rest:
        return Answer(str(words.NO_TIME))
    lowered = rest.lower().strip(" .!")
    with tenant_scope(person.user_id):
        last_capture = _latest(person, ChatRecord.Kind.CAPTURE, now)
        last_ask = _latest(person, ChatRecord.Kind.ASK, now)
    if words.reply_word(rest) == "undo":
        return (
            _undo(person, last_capture.follow_up_id, now)
            if last_capture
            else Answer(str(words.NOTHING_TO_UNDO))
        )
    if lowered.isdigit() and last_ask is not None:
        # A number off the list: the choices again, not silence.
        return _pick(person, last_ask, int(lowered) - 1, now, config) or words.asked(
            person.settings, person.address, last_ask.pk, last_ask.title, last_ask.choices, now
        )
    s = person.settings
    read = capture.parse(rest, s.language, s.timezone, now)
    if isinstance(read, capture.Captured):
        if not read.title and last_capture is not None:  # a new time for the last capture
            return _retime(person, last_capture.follow_up_id, read.due_at, now)
        return _create(person, read.title, read.due_at, now, config)
    if isinstance(read, capture.AskBack):
        return _ask(person, read, now)
    if isinstance(read, capture.NoTime) or command == "remind":
        return Answer(str(words.NO_TIME))
    return _help_once_an_hour(person, now, words.HELP)


def answer(
    channel: str, address: str, text: str, now: datetime, config: NudgeConfig
) -> Answer | None:
    """The answer to a message from ``address``; None for a chat nobody linked, and
    for chatter already answered with help in the last hour."""
    person = _person(channel, address)
    if person is None:
        return None
    with override(person.settings.language):
        if not person.channel:
            return _help_once_an_hour(person, now, words.NOT_CONSENTING)
        return _words(person, text, now, config)


def tap(channel: str, address: str, token: str, now: datetime, config: NudgeConfig) -> Answer:
    """A button pressed in ``address``'s chat, its token verified for that chat: a
    nudge's Snooze / Done (``nudge_actions``), a capture's Undo / Change time, or an
    ask-back's choice."""
    claim = action_tokens.verify(token, address)
    if claim is None or claim.act in (action_tokens.SNOOZE, action_tokens.DONE):
        return nudge_actions.tap(channel, address, claim, now, config)
    person = _person(channel, address)
    if person is None or not person.channel:
        return Answer(str(words.NOT_HERE))
    with override(person.settings.language):
        if claim.act == action_tokens.UNDO:
            return _undo(person, claim.send_id, now)
        if claim.act == action_tokens.RETIME:
            with tenant_scope(person.user_id):
                found = get_follow_up(person.user_id, claim.send_id)
                if found is not None:
                    _record(
                        person,
                        ChatRecord.Kind.CAPTURE,
                        now,
                        follow_up_id=found.pk,
                        title=found.title,
                    )
            return Answer(str(words.NEW_TIME) if found else str(words.NOTHING_TO_UNDO))
        ask_id, index = divmod(claim.send_id, words.MAX_CHOICES)
        with tenant_scope(person.user_id):
            record = ChatRecord.objects.filter(user_id=person.user_id, pk=ask_id).first()
        return _pick(person, record, index, now, config) or Answer(str(words.NOTHING_TO_UNDO))
