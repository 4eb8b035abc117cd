"""What the user area says about a nudge that did not go and about a refused phone number:
a sentence, with a "what you can do" link where there is one. The recorded words (for support
and the API) are never shown; anything unrecognised gets a general sentence."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from accounts.rules import NOT_SET_UP
from core.deployment import NOT_IN_PRODUCTION
from scheduled_sends.failures import MAY_HAVE_BEEN_DELIVERED, FailureKind
from scheduled_sends.queue.states import Outcome
from scheduled_sends.subjects import skip_sentence

SETTINGS = "portal:settings"
CALENDARS = "portal:calendars"


@dataclass(frozen=True)
class PlainWords:
    """A sentence, and optionally where the user can do something about it."""

    text: str
    action: str = ""  # the link's words
    url_name: str = ""  # a portal route, reversed by the template


def _failure(kind: str) -> PlainWords:
    if kind == FailureKind.CONFIGURATION:
        return PlainWords(
            _("This server could not send it: the channel is not set up here yet."),
            _("Choose another channel"),
            SETTINGS,
        )
    if kind == FailureKind.NO_ADDRESS:
        return PlainWords(
            _("There was nowhere to send it: no chat or number is linked."),
            _("Link one in Settings"),
            SETTINGS,
        )
    if kind == FailureKind.REFUSED:
        return PlainWords(
            _("The messaging service would not take it."),
            _("Check your link in Settings"),
            SETTINGS,
        )
    if kind == FailureKind.UNDELIVERED:
        return PlainWords(
            _("It was sent, but it could not reach your phone."),
            _("Check your number in Settings"),
            SETTINGS,
        )
    if kind in MAY_HAVE_BEEN_DELIVERED:
        return PlainWords(
            _("It may have arrived; it was not sent again, so you do not get it twice.")
        )
    return PlainWords(_("It could not be sent."))


# Where the user can do something about a skip, the link's words and route, by the
# recorded reason's start.
_SKIP_ACTIONS = {
    NOT_SET_UP: (gettext_noop("Link Telegram or WhatsApp"), SETTINGS),
    NOT_IN_PRODUCTION: (gettext_noop("Link Telegram or WhatsApp"), SETTINGS),
    "nudges paused": (gettext_noop("Resume in Settings"), SETTINGS),
    "telegram unreachable": (gettext_noop("Link it again"), SETTINGS),
    "whatsapp unreachable": (gettext_noop("Link it again"), SETTINGS),
    "quiet hours": (gettext_noop("Change quiet hours"), SETTINGS),
    "calendar needs re-authorisation": (gettext_noop("Reconnect it"), CALENDARS),
}


def _skipped(reason: str) -> PlainWords:
    said = skip_sentence(reason)
    if not said:
        return PlainWords(_("It was not sent."))
    found = (pair for start, pair in _SKIP_ACTIONS.items() if reason.startswith(start))
    action, url_name = next(found, ("", ""))
    return PlainWords(said, _(action) if action else "", url_name)


def for_outcome(outcome: str | None, failure_kind: str, recorded_reason: str) -> PlainWords:
    """Why a settled nudge did not simply go: what History says after its pill.
    Empty for a sent or pending row; ``recorded_reason`` (``last_error``) is never shown."""
    if outcome == Outcome.EXPIRED:
        return PlainWords(_("It could not be sent in time."))
    if outcome == Outcome.FAILED:
        return _failure(failure_kind)
    if outcome == Outcome.SKIPPED:
        return _skipped(recorded_reason)
    if outcome == Outcome.SENT and failure_kind == FailureKind.UNDELIVERED:
        return _failure(failure_kind)
    return PlainWords("")


def phone_number() -> str:
    return _(
        "Enter the number with its country code, starting with +, "
        "for example +44 7700 900123 or +1 415 555 0100."
    )
