"""Lateness: ``sent_at - max(intended_at, created_at)``, negative when sent early.

A deliver run summarises its rows as percentiles and a fixed-bucket histogram;
histograms add up, so health reads p95 from the run log without scanning the queue.
"""

from __future__ import annotations

import math
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


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class LatenessSummary:
    count: int
    p50: float | None
    p95: float | None
    max: float | None
    histogram: list[list[float | int | None]]  # [[upper bound in s or None for "more"], count]

    @classmethod
    def of(cls, latenesses: Iterable[float]) -> LatenessSummary:
        values = sorted(latenesses)
        counts = [0] * len(BUCKETS)
        for value in values:
            counts[next(i for i, bound in enumerate(BUCKETS) if value <= bound)] += 1
        return cls(
            count=len(values),
            p50=percentile(values, 0.50),
            p95=percentile(values, 0.95),
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
    totals: dict[float, int] = {}
    for histogram in histograms:
        for bound, count in histogram:
            key = math.inf if bound is None else float(bound)
            totals[key] = totals.get(key, 0) + int(count)
    total = sum(totals.values())
    if not total:
        return None
    needed = max(1, math.ceil(0.95 * total))
    seen = 0
    for bound in sorted(totals):
        seen += totals[bound]
        if seen >= needed:
            return bound
    return math.inf
