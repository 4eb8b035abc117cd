"""``GET /metrics``: what every machine's sweeps did, in Prometheus' text format.

Everything is read from PostgreSQL at scrape time (the run log, the queue's
counts under the bypass, health's checks) and nothing is kept in process
memory, so one scrape sees every machine's cron jobs, and a machine that stopped
is seen too. ``nudge_health_check_ok`` mirrors ``nudge_health``'s checks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count
from prometheus_client.core import (
    CollectorRegistry,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from console import charts
from console.health import LATENESS_WINDOW, HealthReport, last_success_at
from core.config import NudgeConfig
from pacing.pacer import rates_in_force
from scheduled_sends.lateness import BUCKETS
from scheduled_sends.models import ScheduledSend, SweepRun
from scheduled_sends.queue.states import unsettled
from scheduled_sends.runlog import DeliverCounts, MaterializeCounts, add_outcomes
from tenancy.scope import rls_bypass

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Counters the deliver runs record, summed over the window.
DELIVER_COUNTS = ("sent", "skipped", "failed", "expired", "retried")


class QueueCollector:
    """Collects once per scrape, at ``now``, with the given health report."""

    def __init__(self, now: datetime, config: NudgeConfig, health: HealthReport) -> None:
        self.now, self.config, self.health = now, config, health

    def collect(self) -> Iterator[Metric]:
        # One short bypass transaction for one snapshot; counts only, as health's.
        with rls_bypass():
            live = list(
                ScheduledSend.objects.filter(unsettled())
                .with_state(self.now, self.config.lease)
                .values_list("queue_state", "channel")
                .annotate(n=Count("id"))
                .order_by()
            )
            settled = list(
                charts.settled_between(
                    self.now - LATENESS_WINDOW, self.now, self.config, user_id=None
                )
                .values_list("outcome", "channel")
                .annotate(n=Count("id"))
                .order_by()
            )
            lateness = list(
                charts.channel_histogram_query(
                    self.now - LATENESS_WINDOW, self.now, self.config
                ).order_by()
            )
            look_ahead = charts.look_ahead(self.now, self.config)
        yield from self._health()
        yield from self._queue(live, settled)
        yield from self._lateness(lateness)
        yield from self._look_ahead(look_ahead)
        yield from self._pacing()
        yield from self._runs()

    def _health(self) -> Iterator[Metric]:
        checks = GaugeMetricFamily(
            "nudge_health_check_ok",
            "1 when the health check passes (as nudge_health)",
            labels=["check"],
        )
        warnings = GaugeMetricFamily(
            "nudge_health_check_warning",
            "1 when the check passes with something to look at (WARN in nudge_health)",
            labels=["check"],
        )
        for check in self.health.checks:
            checks.add_metric([check.name], 1.0 if check.ok else 0.0)
            warnings.add_metric([check.name], 1.0 if check.warning else 0.0)
        yield checks
        yield warnings
        yield GaugeMetricFamily(
            "nudge_health_ok", "1 when every health check passes", self.health.ok
        )
        verdict = GaugeMetricFamily(
            "nudge_health_verdict",
            "1 for the verdict nudge_health and the console state now",
            labels=["verdict"],
        )
        for name in ("healthy", "warning", "unhealthy"):
            verdict.add_metric([name], 1.0 if self.health.verdict == name else 0.0)
        yield verdict

    def _queue(self, live: list, settled: list) -> Iterator[Metric]:
        rows = GaugeMetricFamily(
            "nudge_queue_rows",
            "Unsettled queue rows by state and channel",
            labels=["state", "channel"],
        )
        for state, channel, n in live:
            rows.add_metric([state, channel or "none"], n)
        yield rows
        for name in (
            "due_backlog",
            "overdue_unclaimed",
            "waiting_to_retry",
            "stuck_claims",
            "awaiting_expiry",
        ):
            if name in self.health.figures:
                yield GaugeMetricFamily(
                    f"nudge_queue_{name}",
                    f"Health's {name.replace('_', ' ')} count",
                    float(self.health.figures[name]),  # type: ignore[arg-type]
                )
        outcomes = GaugeMetricFamily(
            "nudge_outcomes_last_15m",
            "Rows settled with each outcome, by channel, intended in the last 15 minutes",
            labels=["outcome", "channel"],
        )
        for outcome, channel, n in settled:
            outcomes.add_metric([outcome, channel or "none"], n)
        yield outcomes

    def _lateness(self, rows: list) -> Iterator[Metric]:
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
            cumulative, buckets = 0, []
            for bound, n in zip(BUCKETS, per_bucket, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == math.inf else f"{bound:g}", cumulative))
            family.add_metric([channel], buckets, gsum_value=sums[channel])
        yield family

    def _pacing(self) -> Iterator[Metric]:
        """The shared rates in force (every process's view: a 429 anywhere lowers
        them), app-wide budgets only: per-user budgets would be a series per user."""
        rate = GaugeMetricFamily(
            "nudge_pacing_rate_per_second",
            "Requests a second in force for each shared budget (channels and providers)",
            labels=["budget"],
        )
        ceiling = GaugeMetricFamily(
            "nudge_pacing_ceiling_per_second",
            "The configured ceiling each shared budget climbs back to",
            labels=["budget"],
        )
        for state in rates_in_force(self.config):
            if state.app_wide:
                rate.add_metric([state.budget], state.rate)
                ceiling.add_metric([state.budget], state.ceiling)
        yield from (rate, ceiling)

    def _look_ahead(self, data: charts.LookAhead) -> Iterator[Metric]:
        load = GaugeMetricFamily(
            "nudge_lookahead_rows",
            "Nudges planned over the next three hours, by channel",
            labels=["channel"],
        )
        peak = GaugeMetricFamily(
            "nudge_lookahead_peak_minute_rows",
            "The busiest minute's planned nudges over the next three hours, by channel",
            labels=["channel"],
        )
        capacity = GaugeMetricFamily(
            "nudge_channel_capacity_per_minute",
            "Nudges a minute can carry on time (rate x run budget x headroom), by channel",
            labels=["channel"],
        )
        for channel, minutes in data.per_channel.items():
            load.add_metric([channel or "none"], sum(minutes))
            peak.add_metric([channel or "none"], max(minutes, default=0))
            if data.capacity.get(channel) is not None:
                capacity.add_metric([channel], data.capacity[channel])
        yield from (load, peak, capacity)

    def _runs(self) -> Iterator[Metric]:
        window = SweepRun.objects.filter(
            as_of__gt=self.now - LATENESS_WINDOW, as_of__lte=self.now
        ).values_list("sweep", "counts")
        totals: dict[str, float] = {}
        limited: dict[str, int] = {}
        syncs: dict[str, dict[str, int]] = {}
        for sweep, counts in window:
            if sweep == SweepRun.Sweep.DELIVER:
                run = DeliverCounts.from_counts(counts)
                for name in DELIVER_COUNTS:
                    totals[name] = totals.get(name, 0) + getattr(run, name)
                by_channel = run.rate_limited_by_channel or (
                    {"unknown": run.rate_limited} if run.rate_limited else {}
                )
                for channel, n in by_channel.items():
                    limited[channel] = limited.get(channel, 0) + int(n)
            else:
                add_outcomes(syncs, MaterializeCounts.from_counts(counts).calendar_outcomes)
        for name in DELIVER_COUNTS:
            yield GaugeMetricFamily(
                f"nudge_{name}_last_15m",
                f"{name.replace('_', ' ')} summed over the deliver runs of the last 15 minutes",
                totals.get(name, 0.0),
            )
        rate_limited = GaugeMetricFamily(
            "nudge_rate_limited_last_15m",
            "Sends answered 429 (rate limited), by channel, deliver runs of the last 15 minutes",
            labels=["channel"],
        )
        for channel, n in sorted(limited.items()):
            rate_limited.add_metric([channel], n)
        yield rate_limited
        outcomes = GaugeMetricFamily(
            "nudge_calendar_syncs_last_15m",
            "Calendars by sync outcome and provider, materialize runs of the last 15 minutes",
            labels=["provider", "outcome"],
        )
        for provider, by_outcome in sorted(syncs.items()):
            for outcome, n in sorted(by_outcome.items()):
                outcomes.add_metric([provider, outcome], n)
        yield outcomes
        yield from self._run_ages()

    def _run_ages(self) -> Iterator[Metric]:
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
            last_ok = last_success_at(sweep)
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
    """The scrape's body."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(now, config, health))
    return generate_latest(registry)
