"""The sweep run log: every run records itself, so silence is never ambiguous. It holds
counts and error classes, never titles, addresses or other user data."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, ClassVar, Self

from django.db import DatabaseError
from django.utils import timezone

from scheduled_sends.models import SweepRun

logger = logging.getLogger("nudge.runlog")


class RunCounts:
    """The figures of a run that code reads back from ``SweepRun.counts``;
    :meth:`from_counts` tolerates an older entry that lacks a field."""

    # A report's fields said only in its summary line or error, or of its process only.
    NOT_RECORDED: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_counts(cls, counts: Mapping[str, object] | None) -> Self:
        counts = counts or {}
        values = {}
        for f in fields(cls):  # type: ignore[arg-type]
            default = f.default if f.default is not MISSING else f.default_factory()
            raw = counts.get(f.name)
            values[f.name] = default if raw is None else type(default)(raw)
        return cls(**values)

    def as_dict(self) -> dict[str, object]:
        """A run's report as the run log's counts: its fields but ``NOT_RECORDED``, with
        ``as_of`` in ISO 8601, rates and seconds rounded, and whether the run went ``ok``."""
        recorded = [f.name for f in fields(self) if f.name not in self.NOT_RECORDED]  # type: ignore[arg-type]
        return {
            **{name: getattr(self, name) for name in recorded},
            "as_of": self.as_of.isoformat(),
            "rates": {name: round(rate, 2) for name, rate in self.rates.items()},
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
        }


@dataclass
class DeliverCounts(RunCounts):
    """What health and ``/metrics`` read of a deliver run (its report extends it)."""

    sent: int = 0
    expired: int = 0
    lateness_histogram: tuple = ()  # [[upper bound in s, or None for "more"], count]
    skipped: int = 0
    failed: int = 0
    retried: int = 0
    rate_limited: int = 0
    rate_limited_by_channel: Counter[str] = field(default_factory=Counter)  # channel -> 429s
    sent_by_channel: Counter[str] = field(default_factory=Counter)  # channel -> sends accepted
    # channel -> failure kind -> rows; "transient" for a retry (429s counted apart).
    failures_by_channel: dict = field(default_factory=dict)
    # channel -> what the channel said of our configuration (names the setting)
    configuration_errors: dict = field(default_factory=dict)


@dataclass
class MaterializeCounts(RunCounts):
    """What health, the next run and ``/metrics`` read of a materialize run (report extends it)."""

    overdue_unclaimed: int = 0  # due rows nobody had claimed, seen in each user's scope
    cut_short: bool = False  # the budget ran out: the next cycle starts with the slices left
    calendars_synced: int = 0
    calendars_unchanged: int = 0
    calendars_failed: int = 0
    calendars_needing_reauth: int = 0
    calendars_deferred: int = 0
    calendar_outcomes: dict = field(default_factory=dict)  # provider -> outcome -> calendars
    rates: dict = field(default_factory=dict)  # providers' request rates at the end (req/s)
    # The shared cycle's slot (ISO 8601; "" for named users) and how it stood at the end.
    cycle: str = ""
    participants: int = 0
    participant: str = ""  # this run's host:pid, as the cycle's slices name their holder
    slices_taken: int = 0
    slices_taken_over: int = 0
    cycle_slices: int = 0
    cycle_slices_done: int = 0


def add_outcomes(
    into: dict[str, dict[str, int]], more: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Add ``more``'s counts, by provider and outcome, to ``into`` (and return it)."""
    for provider, outcomes in more.items():
        counts = into.setdefault(provider, {})
        for outcome, n in outcomes.items():
            counts[outcome] = counts.get(outcome, 0) + int(n)
    return into


NEVER_FINISHED = (
    "never finished: the process ended (killed, or its machine lost) before recording its end"
)


def prune_run_log(cutoff: datetime, batch: int = 5000) -> int:
    """Delete run-log entries started before ``cutoff``, in batches; returns how many."""
    total = 0
    while True:
        doomed = SweepRun.objects.filter(started_at__lt=cutoff).values("pk")[:batch]
        deleted, _ = SweepRun.objects.filter(pk__in=doomed).delete()
        total += deleted
        if deleted < batch:
            return total


@contextmanager
def recorded_run(
    sweep: str, report: Any, *, budget_seconds: float, no_error: str = ""
) -> Iterator[SweepRun]:
    """Record a sweep run as ``report`` stands at its end: counts, summary, and failed if
    an exception (which propagates) ended it or the report is not ``ok`` (its errors, else
    ``no_error``). First closes as failed this sweep's runs "running" past twice the
    budget plus five minutes (a run past its budget still finishes its sends; a killed
    process cannot record its end)."""
    now = timezone.now()
    outlived = timedelta(seconds=2 * budget_seconds + 300)
    closed = SweepRun.objects.filter(
        sweep=sweep, status=SweepRun.Status.RUNNING, started_at__lt=now - outlived
    ).update(status=SweepRun.Status.FAILED, finished_at=now, error=NEVER_FINISHED)
    if closed:
        logger.error("sweep runs never finished", extra={"sweep": sweep, "runs": closed})
    run = SweepRun.objects.create(sweep=sweep, as_of=report.as_of)
    try:
        yield run
    except BaseException as exc:
        run.status = SweepRun.Status.FAILED
        run.error = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    else:
        run.status = SweepRun.Status.OK if report.ok else SweepRun.Status.FAILED
        if not report.ok:
            run.error = "; ".join(report.errors[:20]) or no_error
    finally:
        run.finished_at = timezone.now()
        run.counts = report.as_dict()
        run.summary = report.summary()[:255]
        try:
            run.save(update_fields=["status", "finished_at", "counts", "error", "summary"])
        except DatabaseError:
            # The connection may be what failed; the next run closes this one.
            logger.exception("could not record the end of the %s run", sweep)
        logger.info(
            "sweep finished",
            extra={"sweep": sweep, "status": run.status, "counts": run.counts},
        )
