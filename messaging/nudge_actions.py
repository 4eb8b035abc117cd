"""Snooze and Done, from a Telegram button, a WhatsApp quick reply or the typed word. A
token verifies only for the chat it was sent to; the act runs as that chat's owner, in
their scope and language, recorded as a :class:`NudgeAct` materialize plans from. Each
answer is a sentence for the person; nothing raises for a tap that cannot be honoured.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import translation
from django.utils.translation import gettext_lazy

from accounts.actions import language_of
from accounts.models import DeliverySettings
from accounts.rules import SkipReason, hold_for_quiet_hours, pause_reason, quiet_hours_end
from calendars.models import CalendarEvent
from core.config import NudgeConfig
from followups.actions import FollowUpChange, change_follow_up
from followups.models import FollowUp
from followups.repeat import is_due_at
from messaging import addresses
from messaging.action_tokens import Claim
from messaging.chat_words import NOT_HERE, Answer
from messaging.messages import clock_text
from scheduled_sends.models import Kind, NudgeAct, ScheduledSend
from scheduled_sends.queue import transitions
from scheduled_sends.queue.states import Outcome, unsettled
from scheduled_sends.subjects import (
    EVENT_NOW,
    event_skip_reason,
    follow_up_skip_reason,
    skip_sentence,
)
from tenancy.scope import tenant_scope

Act = NudgeAct.Act
# WhatsApp's customer-service window: a text reply acts on a nudge sent within it.
REPLY_WINDOW = timedelta(hours=24)
# Past the history's seven days and any snooze's life: a repeated tap is recognised.
ACT_RETENTION = timedelta(days=30)

# What the person reads, in the language active when it is formatted (the owner's).
SNOOZED = gettext_lazy("Snoozed until {until}")
SNOOZED_TO_START = gettext_lazy("Snoozed until {until}, when it starts")
SNOOZED_PAST_QUIET = gettext_lazy("Snoozed until {until}, when your quiet hours end")
ALREADY_SNOOZED = gettext_lazy("Already snoozed until {until}")
TOO_LATE = gettext_lazy("Not snoozed: it started at {start}")
QUIET_PAST_START = gettext_lazy("Not snoozed: your quiet hours last until {end}, past its start")
CAPPED = gettext_lazy("Not snoozed: you have as many nudges queued as allowed")
HELD_PAUSED = gettext_lazy("Not snoozed: your nudges are paused.")
HELD = gettext_lazy("Not snoozed: your nudges cannot go out now. Check Settings.")
DONE = gettext_lazy("Done ✓")
ALREADY_DONE = gettext_lazy("Already done ✓")
NOT_A_FOLLOW_UP = gettext_lazy("Only a follow-up can be marked done")
UNKNOWN = gettext_lazy("This nudge is no longer known")
NOTHING_TO_ACT_ON = gettext_lazy("There is no nudge from the last 24 hours to act on")


def _subject_now(row: ScheduledSend) -> tuple[datetime | None, str | None]:
    """The subject's start as it is now, or why it deserves no nudge."""
    if row.kind == Kind.EVENT:
        event = (
            CalendarEvent.objects.filter(user_id=row.user_id, pk=row.ref_id)
            .annotate(**EVENT_NOW)
            .first()
        )
        return (event.starts_at if event else None), event_skip_reason(event)
    follow_up = FollowUp.objects.filter(user_id=row.user_id, pk=row.ref_id).first()
    reason = follow_up_skip_reason(follow_up)
    if follow_up is None:
        return None, reason
    # A repeating follow-up's later occurrence starts when that occurrence is due.
    if is_due_at(follow_up, row.subject_starts_at):
        return row.subject_starts_at, reason
    return follow_up.due_at, reason


def _snooze_instant(now: datetime, snooze: timedelta) -> datetime:
    """The tap plus the snooze, rounded up to the minute: 'until 15:05' is exact."""
    target = now + snooze
    whole = target.replace(second=0, microsecond=0)
    return whole if whole == target else whole + timedelta(minutes=1)


def _caps_full(user_id: int, at: datetime, config: NudgeConfig) -> tuple[bool, int]:
    """Whether one more nudge would break the per-user caps; the rank it would take."""
    pending = ScheduledSend.objects.filter(unsettled(), user_id=user_id)
    minute = at.replace(second=0, microsecond=0)
    in_minute = pending.filter(
        fire_at__gte=minute, fire_at__lt=minute + timedelta(minutes=1)
    ).count()
    full = (
        pending.count() >= config.max_nudges_per_user
        or in_minute >= config.max_nudges_per_user_minute
    )
    return full, in_minute


def _record(row: ScheduledSend, act: str, via: str, now: datetime, **fields: object) -> bool:
    """Record the act once per message; False when it was recorded before (a repeat).
    The user's acts older than ``ACT_RETENTION`` are deleted here."""
    NudgeAct.objects.filter(user_id=row.user_id, created_at__lt=now - ACT_RETENTION).delete()
    try:
        with transaction.atomic():
            NudgeAct.objects.create(
                user_id=row.user_id,
                source_send_id=row.pk,
                act=act,
                kind=row.kind,
                ref_id=row.ref_id,
                subject_starts_at=row.subject_starts_at,
                via=via,
                created_at=now,
                **fields,
            )
    except IntegrityError:
        return False
    return True


def _already_snoozed(
    row: ScheduledSend, now: datetime, settings: DeliverySettings
) -> Answer | None:
    """The answer to a repeated Snooze on the same message, or None for the first."""
    first = NudgeAct.objects.filter(
        user_id=row.user_id, source_send_id=row.pk, act=Act.SNOOZE
    ).first()
    if first is None:
        return None
    return Answer(ALREADY_SNOOZED.format(until=clock_text(settings, first.snoozed_until, now)))


def snooze(user_id: int, send_id: int, via: str, now: datetime, config: NudgeConfig) -> Answer:
    """Queue one nudge for row ``send_id``'s subject at the tap plus ``NUDGE_SNOOZE_MINUTES``
    (to the minute, no later than the start, after quiet hours) within the per-user caps.
    Inside the user's tenant scope."""
    row = ScheduledSend.objects.filter(user_id=user_id, pk=send_id).first()
    settings = DeliverySettings.objects.filter(user_id=user_id).first()
    if row is None or settings is None:
        return Answer(str(UNKNOWN))
    if (repeat := _already_snoozed(row, now, settings)) is not None:
        return repeat
    starts_at, gone = _subject_now(row)
    if gone is not None:
        return Answer(skip_sentence(gone) or str(UNKNOWN))
    if starts_at <= now:
        return Answer(TOO_LATE.format(start=clock_text(settings, starts_at, now)))
    if pause_reason(settings) is not None:
        return Answer(str(HELD_PAUSED if settings.paused else HELD))
    wanted = _snooze_instant(now, config.snooze)
    until = min(wanted, starts_at)
    quiet = hold_for_quiet_hours(until, starts_at, settings)
    if isinstance(quiet, SkipReason):
        ends = quiet_hours_end(until, settings) or until
        return Answer(QUIET_PAST_START.format(end=clock_text(settings, ends, now)))
    full, rank = _caps_full(user_id, quiet, config)
    if full:
        return Answer(str(CAPPED))
    if not _record(row, Act.SNOOZE, via, now, snoozed_until=quiet):
        # A concurrent tap on the same button recorded first: say what it did.
        return _already_snoozed(row, now, settings) or Answer(str(UNKNOWN))
    transitions.enqueue(
        user_id,
        settings.channel,
        [
            transitions.NewNudge(
                row.kind, row.ref_id, quiet, starts_at, min(rank, transitions.MAX_RANK)
            )
        ],
    )
    until_text = clock_text(settings, quiet, now)
    if quiet != until:
        return Answer(SNOOZED_PAST_QUIET.format(until=until_text), changed=True)
    if until == starts_at and wanted > starts_at:
        return Answer(SNOOZED_TO_START.format(until=until_text), changed=True)
    return Answer(SNOOZED.format(until=until_text), changed=True)


def record_done(user_id: int, send_id: int, via: str, now: datetime) -> tuple[Answer, int | None]:
    """Record Done on row ``send_id``'s follow-up and withdraw its pending nudges.
    Inside the user's scope; the caller marks the follow-up (the id returned) done."""
    row = ScheduledSend.objects.filter(user_id=user_id, pk=send_id).first()
    if row is None:
        return Answer(str(UNKNOWN)), None
    if row.kind != Kind.FOLLOW_UP:
        return Answer(str(NOT_A_FOLLOW_UP)), None
    follow_up = FollowUp.objects.filter(user_id=user_id, pk=row.ref_id).first()
    if follow_up is None:
        return Answer(skip_sentence("follow-up deleted")), None
    # Done already (on the website, or by an earlier tap): still withdraw what is left.
    recorded = not follow_up.done and _record(row, Act.DONE, via, now)
    transitions.withdraw_subject(user_id, row.kind, row.ref_id)
    if not recorded:
        return Answer(str(ALREADY_DONE)), None
    return Answer(str(DONE), changed=True), follow_up.pk


def _act(
    owner: int, act: str, send_id: int | None, via: str, now: datetime, config: NudgeConfig
) -> Answer:
    """Snooze or Done on row ``send_id`` (None: no nudge to act on) as ``owner``."""
    with tenant_scope(owner), translation.override(language_of(owner)):
        if send_id is None:
            return Answer(str(NOTHING_TO_ACT_ON))
        if act == Act.SNOOZE:
            return snooze(owner, send_id, via, now, config)
        answer, follow_up_id = record_done(owner, send_id, via, now)
    if follow_up_id is not None:
        change_follow_up(owner, follow_up_id, FollowUpChange(done=True), now)
    return answer


def tap(
    channel: str, address: str, claim: Claim | None, now: datetime, config: NudgeConfig
) -> Answer:
    """A button pressed in ``address``'s chat, its token verified for that chat
    (``action_tokens.verify``): act as the chat's owner."""
    owner = addresses.owner_of(channel, address)
    if claim is None or owner is None:
        return Answer(str(NOT_HERE))
    return _act(owner, claim.act, claim.send_id, channel, now, config)


def reply(
    channel: str, address: str, act: str, now: datetime, config: NudgeConfig
) -> Answer | None:
    """A typed "snooze" / "done": acts on the sender's last nudge on ``channel`` within the
    reply window; None when the address belongs to nobody (not ours to answer)."""
    owner = addresses.owner_of(channel, address)
    if owner is None:
        return None
    with tenant_scope(owner):
        send_id = (
            ScheduledSend.objects.filter(
                user_id=owner, channel=channel, outcome=Outcome.SENT, sent_at__gt=now - REPLY_WINDOW
            )
            .order_by("-sent_at", "-pk")
            .values_list("pk", flat=True)
            .first()
        )
    return _act(owner, act, send_id, channel, now, config)
