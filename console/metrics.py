"""``GET /metrics``: what every machine's sweeps did, in Prometheus' text format, read
from PostgreSQL at scrape time (nothing in process memory), so one scrape sees every
machine, a stopped one too. ``nudge_health_check_ok`` mirrors ``nudge_health``."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import fields
from datetime import datetime

from django.db.models import Count
from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from console import charts
from console.health import DEALT_WITH, LATENESS_WINDOW, HealthReport
from core.config import NudgeConfig
from pacing.pacer import rates_in_force
from scheduled_sends.lateness import BUCKETS
from scheduled_sends.models import ScheduledSend, SweepRun
from scheduled_sends.queue.states import DueCounts, unsettled
from scheduled_sends.runlog import MaterializeCounts, add_outcomes
from tenancy.scope import rls_bypass

CONTENT_TYPE = CONTENT_TYPE_LATEST


def _gauge(name: str, documentation: str, labels: list[str], samples) -> GaugeMetricFamily:
    """A labelled gauge family with one sample per ``(label values, value)``."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for label_values, value in samples:
        family.add_metric(label_values, value)
    return family


class QueueCollector:
    def __init__(self, now: datetime, config: NudgeConfig, health: HealthReport) -> None:
        self.now, self.config, self.health = now, config, health

    def collect(self) -> Iterator[Metric]:
        # One short bypass transaction for one snapshot; counts only, as health's.
        window = (self.now - LATENESS_WINDOW, self.now)
        with rls_bypass():
            live = list(
                ScheduledSend.objects.filter(unsettled())
                .with_state(self.now, self.config.lease)
                .values_list("queue_state", "channel")
                .annotate(n=Count("id"))
                .order_by()
            )
            settled = list(
                charts.settled_between(*window, self.config, user_id=None)
                .values_list("outcome", "channel")
                .annotate(n=Count("id"))
            )
            lateness = list(charts.histogram_query(*window, self.config))
            look_ahead = charts.look_ahead(self.now, self.config)
        yield from self._health()
        yield from self._queue(live, settled)
        yield self._lateness(lateness)
        yield from self._look_ahead(look_ahead)
        yield from self._pacing()
        yield from self._runs()

    def _health(self) -> Iterator[Metric]:
        checks = self.health.checks
        yield _gauge(
            "nudge_health_check_ok",
            "1 when the health check passes (as nudge_health)",
            ["check"],
            (([check.name], float(check.ok)) for check in checks),
        )
        yield _gauge(
            "nudge_health_check_warning",
            "1 when the check passes with something to look at (WARN in nudge_health)",
            ["check"],
            (([check.name], float(check.warning)) for check in checks),
        )
        yield GaugeMetricFamily(
            "nudge_health_ok", "1 when every health check passes", self.health.ok
        )
        yield _gauge(
            "nudge_health_verdict",
            "1 for the verdict nudge_health and the console state now",
            ["verdict"],
            (
                ([name], float(self.health.verdict == name))
                for name in ("healthy", "warning", "unhealthy")
            ),
        )

    def _queue(self, live: list, settled: list) -> Iterator[Metric]:
        yield _gauge(
            "nudge_queue_rows",
            "Unsettled queue rows by state and channel",
            ["state", "channel"],
            (([state, channel or "none"], n) for state, channel, n in live),
        )
        for name in (f.name for f in fields(DueCounts) if f.name != "oldest_due_fire_at"):
            if name in self.health.figures:
                yield GaugeMetricFamily(
                    f"nudge_queue_{name}",
                    f"Health's {name.replace('_', ' ')} count",
                    float(self.health.figures[name]),  # type: ignore[arg-type]
                )
        yield _gauge(
            "nudge_outcomes_last_15m",
            "Rows settled with each outcome, by channel, intended in the last 15 minutes",
            ["outcome", "channel"],
            (([outcome, channel or "none"], n) for outcome, channel, n in settled),
        )

    def _lateness(self, rows: list) -> Metric:
        """Lateness of the nudges sent for the last 15 minutes, by channel, from the
        queue itself: every machine's sends, whichever run made them."""
        counts: dict[str, list[int]] = {}
        sums: dict[str, float] = {}
        for channel, bucket, n, late_sum in rows:
            key = channel or "none"
            counts.setdefault(key, [0] * len(BUCKETS))[bucket] += n
            sums[key] = sums.get(key, 0.0) + float(late_sum or 0.0)
        family = GaugeHistogramMetricFamily(
            "nudge_lateness_seconds_last_15m",
            "Lateness of sent nudges (sent_at - intended instant) intended in the last "
            "15 minutes, by channel",
            labels=["channel"],
        )
        for channel, per_bucket in sorted(counts.items()):
            bounds = ("+Inf" if bound == math.inf else f"{bound:g}" for bound in BUCKETS)
            buckets = list(zip(bounds, itertools.accumulate(per_bucket), strict=True))
            family.add_metric([channel], buckets, gsum_value=sums[channel])
        return family

    def _pacing(self) -> Iterator[Metric]:
        """The shared rates in force (every process's view: a 429 anywhere lowers
        them), app-wide budgets only: per-user budgets would be a series per user."""
        states = [state for state in rates_in_force(self.config) if state.app_wide]
        yield _gauge(
            "nudge_pacing_rate_per_second",
            "Requests a second in force for each shared budget (channels and providers)",
            ["budget"],
            (([state.budget], state.rate) for state in states),
        )
        yield _gauge(
            "nudge_pacing_ceiling_per_second",
            "The configured ceiling each shared budget climbs back to",
            ["budget"],
            (([state.budget], state.ceiling) for state in states),
        )

    def _look_ahead(self, data: charts.LookAhead) -> Iterator[Metric]:
        per_channel = data.per_channel.items()
        yield _gauge(
            "nudge_lookahead_rows",
            "Nudges planned over the next three hours, by channel",
            ["channel"],
            (([channel or "none"], sum(minutes)) for channel, minutes in per_channel),
        )
        yield _gauge(
            "nudge_lookahead_peak_minute_rows",
            "The busiest minute's planned nudges over the next three hours, by channel",
            ["channel"],
            (([channel or "none"], max(minutes, default=0)) for channel, minutes in per_channel),
        )
        yield _gauge(
            "nudge_channel_capacity_per_minute",
            "Nudges a minute can carry on time (rate x run budget x headroom), by channel",
            ["channel"],
            (([channel], n) for channel, n in data.capacity.items() if n is not None),
        )

    def _runs(self) -> Iterator[Metric]:
        totals: Counter[str] = Counter()
        limited: Counter[str] = Counter()
        for run in self.health.deliver_runs:
            totals.update({name: getattr(run, name) for name in DEALT_WITH})
            by_channel = run.rate_limited_by_channel or (
                {"unknown": run.rate_limited} if run.rate_limited else {}
            )
            limited.update({channel: int(n) for channel, n in by_channel.items()})
        syncs: dict[str, dict[str, int]] = {}
        window = SweepRun.objects.filter(as_of__gt=self.now - LATENESS_WINDOW, as_of__lte=self.now)
        materialize = window.filter(sweep=SweepRun.Sweep.MATERIALIZE)
        for counts in materialize.values_list("counts", flat=True):
            add_outcomes(syncs, MaterializeCounts.from_counts(counts).calendar_outcomes)
        for name in DEALT_WITH:
            yield GaugeMetricFamily(
                f"nudge_{name}_last_15m",
                f"{name.replace('_', ' ')} summed over the deliver runs of the last 15 minutes",
                float(totals[name]),
            )
        yield _gauge(
            "nudge_rate_limited_last_15m",
            "Sends answered 429 (rate limited), by channel, deliver runs of the last 15 minutes",
            ["channel"],
            (([channel], n) for channel, n in sorted(limited.items())),
        )
        yield _gauge(
            "nudge_calendar_syncs_last_15m",
            "Calendars by sync outcome and provider, materialize runs of the last 15 minutes",
            ["provider", "outcome"],
            (
                ([provider, outcome], n)
                for provider, by_outcome in sorted(syncs.items())
                for outcome, n in sorted(by_outcome.items())
            ),
        )
        age = GaugeMetricFamily(
            "nudge_sweep_last_success_age_seconds",
            "Seconds since the last successful run of each sweep acted",
            labels=["sweep"],
        )
        duration = GaugeMetricFamily(
            "nudge_sweep_last_duration_seconds",
            "How long the last finished run of each sweep took",
            labels=["sweep"],
        )
        for sweep in SweepRun.Sweep.values:
            last_ok = self.health.figures.get(f"last_{sweep}_at")
            if last_ok is not None:
                age.add_metric([sweep], max(0.0, (self.now - last_ok).total_seconds()))
            last = (
                SweepRun.objects.filter(sweep=sweep, finished_at__isnull=False)
                .order_by("-as_of")
                .values_list("counts", flat=True)
                .first()
            )
            if last is not None and "seconds" in last:
                duration.add_metric([sweep], float(last["seconds"]))
        yield from (age, duration)


def render(now: datetime, config: NudgeConfig, health: HealthReport) -> bytes:
    return generate_latest(QueueCollector(now, config, health))
