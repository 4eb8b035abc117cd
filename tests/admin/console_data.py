"""A day of queue history and three hours ahead, with known figures, for the console.

Rows go in with one ``bulk_create`` under ``support_scope()`` (through the
same row-level security as the console reads them). Every figure a test
asserts is a constant here, so a chart's drawn value can be checked against it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from console.charts import floor_to
from scheduled_sends import failures
from scheduled_sends.failures import FailureKind
from scheduled_sends.models import ScheduledSend
from tenancy.scope import support_scope

# The look-ahead: a steady trickle, and a top-of-hour spike over Telegram's capacity.
TRICKLE_PER_MINUTE = 3  # WhatsApp, every minute of the next three hours
# Telegram, in the minute of the next full hour: over its capacity of 1,045 a minute
# (the pacer's mean under 25/s, 23.75/s, over a 55 s run, less 10 % headroom).
SPIKE_TELEGRAM = 1_800
# Lateness: in one known quarter-hour, ten sends late by 1..10 s and one by 100 s.
KNOWN_LATENESS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100]
# Outcomes in one known hour (hours ago, counted back from the current hour).
KNOWN_HOUR_AGO = 3
KNOWN_OUTCOMES = {"sent": 40, "skipped": 5, "failed": 7, "expired": 2}
KNOWN_RETRIED = 6  # sent rows with a failed attempt behind them
# Failures by kind, each with what last_error said.
FAILURES = {
    (FailureKind.REFUSED, "[400] invalid number"): 4,
    (FailureKind.UNCONFIRMED, "[timeout] Telegram did not answer in time"): 3,
}


@dataclass
class Seeded:
    now: datetime
    spike_minute: datetime
    lateness_quarter: datetime
    outcome_hour: datetime


def _row(user_id: int, ref: int, fire_at: datetime, **fields) -> ScheduledSend:
    values = {
        "kind": "follow_up",
        "intended_at": fire_at,
        "subject_starts_at": fire_at + timedelta(minutes=10),
        **fields,
    }
    return ScheduledSend(user_id=user_id, ref_id=ref, fire_at=fire_at, **values)


def seed_console(user_ids: list[int], now: datetime) -> Seeded:
    """The rows behind every chart and health line of the landing page."""
    refs = iter(range(1, 10_000_000))
    rows: list[ScheduledSend] = []

    def add(fire_at: datetime, **fields) -> None:
        user = user_ids[len(rows) % len(user_ids)]
        rows.append(_row(user, next(refs), fire_at, **fields))

    minute = floor_to(now, timedelta(minutes=1))
    for m in range(1, 180):
        for _ in range(TRICKLE_PER_MINUTE):
            add(minute + timedelta(minutes=m, seconds=10), channel="whatsapp")
    spike = floor_to(now, timedelta(hours=1)) + timedelta(hours=1)
    for _ in range(SPIKE_TELEGRAM):
        add(spike + timedelta(seconds=1), channel="telegram")

    # A quarter-hour well inside the last day, with known lateness.
    quarter = floor_to(now, timedelta(minutes=15)) - timedelta(hours=2)
    for seconds in KNOWN_LATENESS:
        fire = quarter + timedelta(minutes=1)
        add(fire, sent_at=fire + timedelta(seconds=seconds), outcome="sent", channel="whatsapp")

    hour = floor_to(now, timedelta(hours=1)) - timedelta(hours=KNOWN_HOUR_AGO)
    at = hour + timedelta(minutes=20)
    for n in range(KNOWN_OUTCOMES["sent"]):
        add(
            at,
            sent_at=at + timedelta(seconds=2),
            outcome="sent",
            attempts=1 if n < KNOWN_RETRIED else 0,
            channel="telegram",
        )
    for _ in range(KNOWN_OUTCOMES["skipped"]):
        add(at, sent_at=at, outcome="skipped", last_error="event cancelled")
    for (kind, reason), count in FAILURES.items():
        for _ in range(count):
            add(
                at,
                outcome="failed",
                attempts=1,
                last_error=failures.reason(kind, reason),
                failure_kind=kind,
                channel="telegram",
            )
    for _ in range(KNOWN_OUTCOMES["expired"]):
        add(at, outcome="expired")

    # Something for the health lines to point at: a stuck claim and an overdue row.
    add(now - timedelta(minutes=4), claimed_at=now - timedelta(hours=1), claim_token=uuid.uuid4())
    add(now - timedelta(minutes=5))
    with support_scope():
        ScheduledSend.objects.bulk_create(rows, batch_size=2000)
    return Seeded(now, spike, quarter, hour)


def utc_minute(instant: datetime) -> str:
    return f"{instant.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
