"""The figures behind the support console's charts, read from the queue.

Each query is bounded by a window on an indexed ``fire_at`` (settled windows widened
by ``max_early``, then ``intended_at`` exactly), so its cost follows the window's
rows. An optional ``user_id`` gives one tenant's charts; callers choose the scope.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import (
    Aggregate,
    Case,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    IntegerField,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Extract, Greatest, Trunc

from accounts.models import Channel
from core.config import NudgeConfig
from scheduled_sends import failures
from scheduled_sends.lateness import BUCKETS
from scheduled_sends.models import Outcome, ScheduledSend
from scheduled_sends.queue.states import unsettled

LOOK_AHEAD = timedelta(hours=3)
HISTORY = timedelta(hours=24)
QUARTER = timedelta(minutes=15)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont``: the exact interpolated percentile at ``fraction``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def floor_to(instant: datetime, step: timedelta) -> datetime:
    """``instant`` rounded down to a multiple of ``step`` since the epoch (UTC)."""
    return EPOCH + (instant - EPOCH) // step * step


def _rows(user_id: int | None) -> QuerySet[ScheduledSend]:
    rows = ScheduledSend.objects.order_by()
    return rows if user_id is None else rows.filter(user_id=user_id)


def settled_between(
    start: datetime, end: datetime, config: NudgeConfig, user_id: int | None
) -> QuerySet:
    """Rows meant for ``[start, end)``, found through the ``fire_at`` index (a row may
    have been sent up to ``max_early`` before its intended instant)."""
    max_early = config.max_early
    return (
        _rows(user_id)
        .filter(outcome__isnull=False, fire_at__gte=start - max_early, fire_at__lt=end)
        .filter(intended_at__gte=start, intended_at__lt=end)
    )


@dataclass
class LookAhead:
    start: datetime  # the first minute shown
    minutes: int
    per_channel: dict[str, list[int]]  # channel -> count per minute
    capacity: dict[str, int | None]


def look_ahead(now: datetime, config: NudgeConfig, user_id: int | None = None) -> LookAhead:
    """Unsettled nudges per planned send minute and channel, from this minute on."""
    start = floor_to(now, timedelta(minutes=1))
    minutes = int(LOOK_AHEAD / timedelta(minutes=1))
    per_channel: dict[str, list[int]] = {}
    for minute, channel, n in look_ahead_query(start, user_id):
        slot = int((minute - start) / timedelta(minutes=1))
        per_channel.setdefault(channel, [0] * minutes)[slot] += n
    # Paced channels always appear, so their capacity is visible before the queue fills.
    for channel in config.channel_rates:
        if config.rate(channel) > 0:
            per_channel.setdefault(channel, [0] * minutes)
    ordered = dict(sorted(per_channel.items(), key=lambda item: _channel_order(item[0])))
    return LookAhead(
        start=start,
        minutes=minutes,
        per_channel=ordered,
        capacity={channel: config.per_minute_capacity(channel) for channel in ordered},
    )


def look_ahead_query(start: datetime, user_id: int | None = None) -> QuerySet:
    """(minute, channel, rows) for unsettled rows planned in ``[start, start + 3 h)``."""
    return (
        _rows(user_id)
        .filter(unsettled(), fire_at__gte=start, fire_at__lt=start + LOOK_AHEAD)
        .annotate(minute=Trunc("fire_at", "minute", tzinfo=UTC))
        .values_list("minute", "channel")
        .annotate(n=Count("id"))
    )


def _channel_order(channel: str) -> tuple[int, str]:
    known = [c.value for c in Channel]
    return (known.index(channel), channel) if channel in known else (len(known), channel)


@dataclass
class LatenessQuarter:
    start: datetime
    sent: int
    p50: float
    p95: float
    max: float


@dataclass
class Lateness:
    quarters: int  # shown, the last ending with the current one
    by_quarter: dict[int, LatenessQuarter]  # slot -> figures; quarters with no sends absent
    histogram: list[tuple[float, int]]  # (upper bound in seconds, count), every bucket

    @property
    def sent(self) -> int:
        return sum(count for _, count in self.histogram)


def _lateness_seconds() -> Extract:
    # As ``lateness.due_from``: a nudge cannot be late for a time before it was queued.
    due_from = Case(
        When(created_at__lte=F("sent_at"), then=Greatest("intended_at", "created_at")),
        default=F("intended_at"),
    )
    late = ExpressionWrapper(F("sent_at") - due_from, output_field=DurationField())
    return Extract(late, "epoch")


def lateness(now: datetime, config: NudgeConfig, user_id: int | None = None) -> Lateness:
    """p50 / p95 / max lateness per quarter-hour over the last day, and its histogram."""
    end = floor_to(now, QUARTER) + QUARTER
    start = end - HISTORY
    by_quarter = {}
    for row in lateness_query(start, end, config, user_id):
        slot = int((row["quarter"] - start) / QUARTER)
        by_quarter[slot] = LatenessQuarter(
            row["quarter"], row["n"], row["p50"], row["p95"], float(row["top"])
        )
    counts: Counter[int] = Counter()
    for _, bucket, n, _ in histogram_query(start, end, config, user_id):
        counts[bucket] += n
    histogram = [(bound, counts[i]) for i, bound in enumerate(BUCKETS)]
    return Lateness(int(HISTORY / QUARTER), by_quarter, histogram)


def _sent_between(
    start: datetime, end: datetime, config: NudgeConfig, user_id: int | None
) -> QuerySet:
    return (
        settled_between(start, end, config, user_id)
        .filter(outcome=Outcome.SENT)
        .annotate(late=_lateness_seconds())
    )


def lateness_query(
    start: datetime, end: datetime, config: NudgeConfig, user_id: int | None = None
) -> QuerySet:
    """Per intended quarter-hour: rows sent, p50 / p95 / max lateness in seconds."""
    return (
        _sent_between(start, end, config, user_id)
        .annotate(quarter=_quarter_of("intended_at"))
        .values("quarter")
        .annotate(
            n=Count("id"),
            p50=Percentile("late", fraction=0.5),
            p95=Percentile("late", fraction=0.95),
            top=Max("late"),
        )
    )


def _bucket() -> Case:
    """The row's bucket: its index into ``BUCKETS``."""
    return Case(
        *[
            When(late__lte=bound, then=Value(i))
            for i, bound in enumerate(BUCKETS)
            if not math.isinf(bound)
        ],
        default=Value(len(BUCKETS) - 1),
        output_field=IntegerField(),
    )


def histogram_query(
    start: datetime, end: datetime, config: NudgeConfig, user_id: int | None = None
) -> QuerySet:
    """(channel, bucket index into ``BUCKETS``, rows, seconds late summed) for the rows
    sent in the window: the lateness chart's histogram and ``/metrics``' by channel."""
    return (
        _sent_between(start, end, config, user_id)
        .annotate(bucket=_bucket())
        .values("channel", "bucket")
        .annotate(n=Count("id"), late_sum=Sum("late"))
        .values_list("channel", "bucket", "n", "late_sum")
    )


def _quarter_of(column: str) -> Func:
    """The quarter-hour a timestamp falls in (PostgreSQL's ``date_bin``, UTC-aligned)."""
    return Func(
        Value(QUARTER),
        F(column),
        Value(EPOCH),
        function="date_bin",
        output_field=DateTimeField(),
    )


@dataclass
class OutcomeHour:
    start: datetime
    counts: Counter[str] = field(default_factory=Counter)  # outcome -> rows
    retried: int = 0  # rows with a failed attempt behind them (attempts > 0)
    failures: Counter[str] = field(default_factory=Counter)  # failure kind's label -> rows
    sent_by_kind: Counter[str] = field(default_factory=Counter)  # queue kind -> rows sent


def outcomes(now: datetime, config: NudgeConfig, user_id: int | None = None) -> list[OutcomeHour]:
    """Settled nudges per intended hour over the last day: outcomes, retries, failure kinds."""
    end = floor_to(now, timedelta(hours=1)) + timedelta(hours=1)
    start = end - HISTORY
    hours = [
        OutcomeHour(start + timedelta(hours=i)) for i in range(int(HISTORY / timedelta(hours=1)))
    ]
    for hour, outcome, kind, nudge_kind, n, retried in outcomes_query(start, end, config, user_id):
        bucket = hours[int((hour - start) / timedelta(hours=1))]
        bucket.counts[outcome] += n
        bucket.retried += retried
        if outcome == Outcome.SENT:
            bucket.sent_by_kind[nudge_kind] += n
        if outcome == Outcome.FAILED:
            bucket.failures[failures.label(kind)] += n
    return hours


def outcomes_query(
    start: datetime, end: datetime, config: NudgeConfig, user_id: int | None = None
) -> QuerySet:
    """(intended hour, outcome, failure kind, queue kind, rows, rows retried) for settled rows."""
    return (
        settled_between(start, end, config, user_id)
        .annotate(
            hour=Trunc("intended_at", "hour", tzinfo=UTC),
            failure=Case(When(outcome=Outcome.FAILED, then="failure_kind"), default=Value("")),
        )
        .values_list("hour", "outcome", "failure", "kind")
        .annotate(n=Count("id"), retried=Count("id", filter=Q(attempts__gt=0)))
    )
