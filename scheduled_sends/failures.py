"""Why a nudge failed, as a value, and every sentence said about it: pages read the
:class:`FailureKind`, never recognise a failure by its text."""

from __future__ import annotations

from django.db import models


class FailureKind(models.TextChoices):
    """What went wrong; stored in ``failure_kind`` ("" when nothing did)."""

    REFUSED = "refused", "The provider refused it"
    CONFIGURATION = "configuration", "Our channel configuration"
    NO_ADDRESS = "no_address", "No address for the channel"
    UNCONFIRMED = "unconfirmed", "No answer from the provider (may have been delivered)"
    UNUSABLE_RECEIPT = "unusable_receipt", "Unusable answer (may have been delivered)"
    INTERRUPTED = "interrupted", "Interrupted mid-send (may have been delivered)"
    UNDELIVERED = "undelivered", "Sent, but the provider reported it undelivered"


# May have reached the user: not resent, and support is warned before retrying.
MAY_HAVE_BEEN_DELIVERED = frozenset(
    {FailureKind.UNCONFIRMED, FailureKind.UNUSABLE_RECEIPT, FailureKind.INTERRUPTED}
)

# The run log's count of retries after a provider or network error (no FailureKind).
TRANSIENT = "transient"

# Receipt statuses that mean the provider gave up on a message it had accepted.
UNDELIVERED_STATUSES = ("undelivered", "failed")

INTERRUPTED_REASON = (
    "delivery was interrupted mid-send (the worker died); not resent, to avoid a duplicate"
)
UNUSABLE_RECEIPT = (
    "the channel accepted the message but returned no usable message id; "
    "it may have been delivered, so it is not resent"
)
NOT_RESENT = " — it may have been delivered; not resent"


def reason(kind: FailureKind, detail: str = "") -> str:
    """The row's ``last_error`` for a failure of ``kind``; ``detail`` is what the channel said."""
    if kind == FailureKind.INTERRUPTED:
        return INTERRUPTED_REASON
    if kind == FailureKind.UNCONFIRMED:
        return f"{detail}{NOT_RESENT}"
    return detail


def label(kind: str) -> str:
    """The kind as the console's charts and filters name it."""
    return FailureKind(kind).label if kind in FailureKind.values else "(kind not recorded)"


def count_label(kind: str) -> str:
    """A kind in health's counts ("3 refused, 2 transient")."""
    return "provider or network error, retried" if kind == TRANSIENT else label(kind)


def doubt(kind: str) -> str:
    """Why a row failed this way may have reached the user ("" when it cannot have)."""
    if kind not in MAY_HAVE_BEEN_DELIVERED:
        return ""
    why = (
        "its deliver run died mid-send, so the provider may already have delivered it"
        if kind == FailureKind.INTERRUPTED
        else "the provider got the request but its answer was lost or unreadable, "
        "so it may already have been delivered"
    )
    return f"{why}; retrying may send it twice (check the provider first)"
