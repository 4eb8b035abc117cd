"""What a send's answer settles as: a pure function, one row per kind of answer."""

from __future__ import annotations

from datetime import timedelta

import pytest

from messaging.channels.base import (
    PermanentSendError,
    RateLimited,
    SendError,
    SendReceipt,
    TransientSendError,
    UnconfirmedSendError,
)
from scheduled_sends.failures import FailureKind
from scheduled_sends.queue import statements
from scheduled_sends.queue.transitions import Transition
from scheduled_sends.subjects import Facts
from sweeps.verdicts import SendAttempt, classify

DELAY = timedelta(seconds=90)


@pytest.mark.parametrize(
    ("answer", "transition", "kind"),
    [
        (SendReceipt("SM1"), Transition.SENT, ""),
        (SendReceipt(""), Transition.FAILED, FailureKind.UNUSABLE_RECEIPT),
        (PermanentSendError("chat not found", code="400"), Transition.FAILED, FailureKind.REFUSED),
        (
            PermanentSendError("token empty", code="config", kind=FailureKind.CONFIGURATION),
            Transition.FAILED,
            FailureKind.CONFIGURATION,
        ),
        (UnconfirmedSendError("no answer", code="timeout"), Transition.FAILED, "unconfirmed"),
        (TransientSendError("down", code="500"), Transition.RETRY, ""),
        (SendError("odd"), Transition.RETRY, ""),
        (RateLimited("slow", retry_after=30), Transition.RETRY, ""),
        (KeyError("bug"), Transition.RETRY, ""),
    ],
)
def test_each_answer_settles_one_way_with_its_kind(answer, transition, kind):
    attempt = (
        SendAttempt(finished=0.0, error=answer)
        if isinstance(answer, BaseException)
        else SendAttempt(finished=0.0, receipt=answer)
    )
    verdict = classify(attempt, DELAY)
    assert (verdict.transition, verdict.failure_kind) == (transition, kind)
    if transition is Transition.RETRY:
        assert verdict.wait == (timedelta(seconds=30) if verdict.rate_limited else DELAY)
    assert verdict.unexpected == isinstance(answer, KeyError)


def test_an_unconfirmed_failure_says_it_was_not_resent():
    verdict = classify(SendAttempt(0.0, error=UnconfirmedSendError("no answer", code="t")), DELAY)
    assert verdict.reason == "[t] no answer — it may have been delivered; not resent"


def test_the_resolve_query_and_the_facts_name_the_same_columns(db):
    """Facts are read by name: the statement's own column names are the fields."""
    from django.db import connection

    assert [f for f in Facts.__dataclass_fields__] == list(statements.RESOLVE_COLUMNS)
    params = {
        "user_id": 0,
        "kind": "event",
        "ref_id": 0,
        "event": "event",
        "follow_up": "follow_up",
        "cancelled": "cancelled",
        "needs_reauth": "needs_reauth",
        "snooze": "snooze",
        "intended_at": None,
    }
    with connection.cursor() as cursor:
        cursor.execute(statements.RESOLVE_NUDGE, params)
        assert [column.name for column in cursor.description] == list(Facts.__dataclass_fields__)
