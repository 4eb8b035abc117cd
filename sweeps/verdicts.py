"""How a claimed nudge settles, pure: :func:`decide` (row and ``Facts`` to a
:class:`Delivery` or :class:`Verdict`) and :func:`classify` (a send's attempt to a
:class:`Verdict`). Composed at send time, a nudge moved earlier says the real time left.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from accounts.models import DeliverySettings
from accounts.rules import SkipReason, held_by_quiet_hours, hold_for_quiet_hours, pause_reason
from core.config import NudgeConfig
from messaging.channels.base import (
    NudgeActions,
    NudgeMessage,
    PermanentSendError,
    RateLimited,
    SendError,
    UnconfirmedSendError,
)
from messaging.messages import Shape, compose, compose_agenda
from scheduled_sends import failures
from scheduled_sends.day import Item, day_of
from scheduled_sends.failures import FailureKind
from scheduled_sends.models import Kind
from scheduled_sends.queue.transitions import ClaimedSend, Transition
from scheduled_sends.subjects import (
    Facts,
    event_skip_reason,
    follow_up_skip_reason,
    occurrence_start,
)


@dataclass(order=True)
class Delivery:
    """A claimed row to send: where and what; in a deliver run, ordered by ``deadline``."""

    row: ClaimedSend = field(compare=False)
    channel: str = field(compare=False)
    address: str = field(compare=False)
    message: NudgeMessage = field(compare=False)
    deadline: float = 0.0  # monotonic instant its send slot opens


@dataclass(frozen=True)
class Verdict:
    """How a claimed row settles, as data: the transition and what it writes."""

    transition: Transition
    reason: str = ""
    failure_kind: str = ""
    message_id: str = ""
    wait: timedelta | None = None  # not before this long after settling (retries)
    rate_limited: bool = False  # a 429: the channel pauses for ``wait``
    problem: str = ""  # what fails the run's health ("" for the user's or provider's doing)
    unexpected: bool = False  # an exception no channel should raise: logged as a bug
    refusal: PermanentSendError | None = None  # may mean the person cannot be reached


def skip(reason: str) -> Verdict:
    return Verdict(Transition.SKIPPED, reason)


def fail(kind: FailureKind, detail: str = "", **more: object) -> Verdict:
    """Settled ``failed``, never resent."""
    return Verdict(Transition.FAILED, failures.reason(kind, detail), kind, **more)


def retry(reason: str, wait: timedelta, *, problem: str = "", unexpected: bool = False) -> Verdict:
    return Verdict(Transition.RETRY, reason, wait=wait, problem=problem, unexpected=unexpected)


# A claim that finds ``send_started_at`` set: its run died mid-send.
INTERRUPTED = fail(FailureKind.INTERRUPTED)


def _shape(row: ClaimedSend, facts: Facts) -> Shape:
    """Which words the nudge opens with."""
    if facts.snoozed:
        return Shape.SNOOZED
    if held_by_quiet_hours(row.intended_at, facts):
        return Shape.QUIET_HOURS
    return Shape.REMINDER


def decide(
    row: ClaimedSend,
    facts: Facts,
    now: datetime,
    config: NudgeConfig,
    agenda: list[Item] | None = None,
) -> Delivery | Verdict:
    """Send, skip (with the reason) or fail, from what is true now; ``agenda`` is an
    agenda row's items (``subjects.read_agendas``): nothing is said on an empty day."""
    if not facts.user_active:
        return skip("account deactivated")
    if not facts.has_settings or not facts.enabled:
        return skip("nudges are turned off for this user")
    held = pause_reason(facts)
    if held is not None:
        return skip(held.reason)
    if row.kind == Kind.AGENDA:
        if not agenda:
            return skip("nothing on the day")
        starts_at = row.subject_starts_at
    else:
        rule = event_skip_reason if row.kind == Kind.EVENT else follow_up_skip_reason
        gone = rule(facts if facts.found else None)
        if gone:
            return skip(gone)
        starts_at = occurrence_start(row, facts)
        if starts_at != row.subject_starts_at:
            return skip("subject moved; its new time has its own nudge")
        # A nudge meant for the very start ("at the time of the event", lead 0)
        # is still worth sending within grace; one meant before it is not.
        if starts_at <= now and row.intended_at < starts_at:
            return skip("subject already begun")
    # Quiet hours drop the nudge, or moved it where it has its own row.
    quiet = hold_for_quiet_hours(row.intended_at, starts_at, facts)
    if isinstance(quiet, SkipReason):
        return skip(quiet.reason)
    if quiet != row.intended_at:
        return skip(f"quiet hours: moved to {quiet:%H:%M}Z, where it has its own nudge")
    address = DeliverySettings(
        user_id=row.user_id,
        channel=facts.channel,
        whatsapp_number=facts.whatsapp_number,
        telegram_chat_id=facts.telegram_chat_id,
    ).address()
    if not address:
        return fail(
            FailureKind.NO_ADDRESS, f"no address configured for the {facts.channel} channel"
        )
    said = {
        "now": now,
        "tz_name": facts.timezone,
        "valid_until": row.intended_at + config.grace,
        "language": facts.language,
        "clock": facts.clock,
    }
    if row.kind == Kind.AGENDA:
        message = compose_agenda(agenda, day=day_of(row.ref_id), **said)
    else:
        message = compose(
            kind=row.kind,
            title=facts.title,
            starts_at=starts_at,
            join_url=facts.join_url,
            location=facts.location,
            shape=_shape(row, facts),
            **said,
        )
        # Buttons bound to this row; channels without buttons ignore them.
        message = replace(
            message,
            actions=NudgeActions(
                send_id=row.id,
                snooze_minutes=int(config.snooze.total_seconds() // 60),
                can_mark_done=row.kind == Kind.FOLLOW_UP,
            ),
        )
    return Delivery(row, facts.channel, address, message)


@dataclass(frozen=True)
class SendAttempt:
    """What one send returned, and when (monotonic), from the worker thread."""

    finished: float
    receipt: object = None
    error: BaseException | None = None
    not_tried: bool = False  # a 429 paused the channel while the row waited
    slot_missed: bool = False  # reached its send slot too late (see ChannelPacer.take_turn)


def describe_unexpected(exc: BaseException) -> str:
    """``Type: message`` for last_error, even for an exception whose str() fails."""
    try:
        text = str(exc)
    except Exception:
        text = "(unprintable)"
    return f"{type(exc).__name__}: {text}"[:1000]


def classify(attempt: SendAttempt, retry_delay: timedelta) -> Verdict:
    """How a tried send settles: refused for good or possibly delivered, failed and never
    resent (a duplicate is worse than a missing nudge); otherwise retried within grace.
    An exception no channel should raise also fails the run's health."""
    exc = attempt.error
    if exc is None:
        message_id = getattr(attempt.receipt, "provider_message_id", None)
        if not isinstance(message_id, str) or not message_id:
            # Accepted, but we cannot say what: a channel bug. Probably sent.
            return fail(
                FailureKind.UNUSABLE_RECEIPT,
                f"{failures.UNUSABLE_RECEIPT} ({type(attempt.receipt).__name__})",
                problem="unusable receipt",
            )
        return Verdict(Transition.SENT, message_id=message_id)
    if isinstance(exc, RateLimited):
        wait = timedelta(seconds=max(1.0, exc.retry_after or 60.0))
        return Verdict(Transition.RETRY, exc.describe(), wait=wait, rate_limited=True)
    if isinstance(exc, PermanentSendError):
        # Our own configuration fails every send on the channel: fail the run loudly.
        problem = exc.describe() if exc.kind == FailureKind.CONFIGURATION else ""
        return fail(exc.kind, exc.describe(), refusal=exc, problem=problem)
    if isinstance(exc, UnconfirmedSendError):
        return fail(exc.kind, exc.describe())
    if isinstance(exc, SendError):
        return retry(exc.describe(), retry_delay)
    return retry(describe_unexpected(exc), retry_delay, problem=type(exc).__name__, unexpected=True)
