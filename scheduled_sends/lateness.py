"""Lateness: ``sent_at - max(intended_at, created_at)``, negative when sent early. A deliver
run summarises its rows as percentiles and a fixed-bucket histogram; histograms add up, so
health reads p95 from the run log without scanning the queue."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

# Upper bounds in seconds; a lateness lands in the first bucket it does not exceed.
BUCKETS: tuple[float, ...] = (0, 5, 10, 15, 30, 45, 60, 90, 120, 300, 600, 900, math.inf)


def due_from(intended_at: datetime, created_at: datetime | None, sent_at: datetime) -> datetime:
    """The intended instant, or when the row was queued if later; a ``created_at``
    after the send is a simulated clock's, ignored (as ``charts._lateness_seconds``)."""
    if created_at is None or created_at > sent_at:
        return intended_at
    return max(intended_at, created_at)


def percentile(counted: Iterable[tuple[float, int]], fraction: float) -> float | None:
    """Nearest-rank percentile over ``(value, how many)`` in ascending order (None: none)."""
    counted = list(counted)
    needed = max(1, math.ceil(fraction * sum(n for _, n in counted)))
    seen = 0
    for value, n in counted:
        seen += n
        if seen >= needed:
            return value
    return None


@dataclass(frozen=True)
class LatenessSummary:
    p50: float | None
    p95: float | None
    max: float | None
    histogram: list[list[float | int | None]]  # [[upper bound in s or None for "more"], count]

    @classmethod
    def of(cls, latenesses: Iterable[float]) -> LatenessSummary:
        values = sorted(latenesses)
        each = [(value, 1) for value in values]
        counts = [0] * len(BUCKETS)
        for value in values:
            counts[next(i for i, bound in enumerate(BUCKETS) if value <= bound)] += 1
        return cls(
            p50=percentile(each, 0.50),
            p95=percentile(each, 0.95),
            max=values[-1] if values else None,
            histogram=[
                [None if math.isinf(bound) else bound, n]
                for bound, n in zip(BUCKETS, counts, strict=True)
                if n
            ],
        )

    def as_counts(self) -> dict[str, object]:
        """The run log's fields people read (the histogram is ``runlog.DeliverCounts``)."""
        figures = {"p50": self.p50, "p95": self.p95, "max": self.max}
        return {
            f"lateness_{name}_seconds": None if value is None else round(value, 3)
            for name, value in figures.items()
        }


def merged_p95(histograms: Iterable[Sequence[Sequence[float | int | None]]]) -> float | None:
    """The p95 bucket bound over several runs' histograms (None: no sends; inf: beyond)."""
    totals: Counter[float] = Counter()
    for histogram in histograms:
        for bound, count in histogram:
            totals[math.inf if bound is None else float(bound)] += int(count)
    return percentile(sorted(totals.items()), 0.95)
