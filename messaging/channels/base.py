"""What every delivery channel implements (:class:`Sender`): one composed message to one
address, without the database; a :class:`SendReceipt`, or one of the errors below, which
``sweeps.verdicts.classify`` settles the row by (retry later, or fail).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass

from django.utils.module_loading import import_string

from core.config import NudgeConfig
from scheduled_sends.failures import FailureKind

REDACTED = "[redacted]"


@dataclass(frozen=True)
class NudgeActions:
    """What the person may do from the message (``messaging.action_tokens``)."""

    send_id: int  # the queue row the message is sent for
    snooze_minutes: int
    can_mark_done: bool  # follow-ups only: an event is not "done"


@dataclass(frozen=True)
class NudgeMessage:
    """What to say, already composed in the recipient's time zone."""

    text: str  # the full plain-text message
    title: str  # the subject's title, sanitised and truncated
    local_time: str  # e.g. "15:00", in the user's time zone
    minutes_until: int  # whole minutes from now until the subject starts
    valid_for_seconds: int  # after this the nudge is wrong, not late
    join_url: str = ""  # an https meeting link from a known host, or ""
    actions: NudgeActions | None = None  # Snooze / Done buttons; None: a plain message
    language: str = "en"  # the recipient's language (settings.LANGUAGES), for buttons
    links: tuple[tuple[str, str], ...] = ()  # (label, https link): more Join buttons (the agenda)


@dataclass(frozen=True)
class SendReceipt:
    provider_message_id: str


class SendError(Exception):
    """A send that did not go through. ``code`` is the provider's own error code;
    ``kind`` whose problem a failure settled from it is (``failures.FailureKind``)."""

    kind: FailureKind = FailureKind.REFUSED

    def __init__(self, message: str, *, code: str = "", kind: FailureKind | None = None) -> None:
        super().__init__(message)
        self.code = code
        if kind is not None:
            self.kind = kind

    def describe(self) -> str:
        return f"[{self.code}] {self}" if self.code else str(self)

    def redacted(self, *secrets: str) -> SendError:
        """This error with every secret replaced (providers quote credentials back)."""
        text = str(self)
        for secret in secrets:
            if secret:
                text = text.replace(secret, REDACTED)
        if text == str(self):
            return self
        clone = copy.copy(self)
        clone.args = (text,)
        return clone


class TransientSendError(SendError):
    """Worth trying again later: timeouts, 5xx, connection failures."""

    def __init__(self, message: str, *, code: str = "", retry_after: float | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class RateLimited(TransientSendError):
    """The provider asked us to slow down; honour ``retry_after`` (seconds)."""


class PermanentSendError(SendError):
    """Trying again cannot help: the address or the account is wrong."""


class UnconfirmedSendError(SendError):
    """The provider may have the message; resending risks a duplicate nudge."""

    kind = FailureKind.UNCONFIRMED


def unreadable_acceptance(provider: str, what: str) -> PermanentSendError:
    """The provider said 2xx but its answer is unusable: probably sent, so not sent again
    (a duplicate is worse than a miss support can see in ``last_error``)."""
    return PermanentSendError(
        f"{provider} accepted the message but its answer was unreadable ({what}); "
        "not resent, to avoid a duplicate",
        code="protocol",
        kind=FailureKind.UNUSABLE_RECEIPT,
    )


def misconfigured(problem: str, code: str = "config") -> PermanentSendError:
    """A setting the operator must fix: every send fails the same way until then."""
    return PermanentSendError(problem, code=code, kind=FailureKind.CONFIGURATION)


class Sender(ABC):
    """Sends nudges over one channel (``models.Channel`` names the channels)."""

    @abstractmethod
    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        """Send ``message`` to ``address`` or raise a :class:`SendError`."""

    def warm_up(self) -> None:  # noqa: B027 — optional hook, most channels need none
        """Do once-per-run set-up before the first send slot. Must not raise: a
        failure here shows again, classified, in :meth:`send`."""

    def close(self) -> None:  # noqa: B027 — optional hook, most channels hold nothing
        """Release connections at the end of a run."""


def get_sender(channel: str, config: NudgeConfig) -> Sender:
    """A fresh instance of the sender configured for ``channel``."""
    try:
        dotted_path = config.channel_backends[channel]
    except KeyError:
        raise misconfigured(f"no channel is configured for {channel!r}", code="") from None
    return import_string(dotted_path)()
