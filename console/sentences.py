"""What the support console shows, in words and pictures: the presentation layer.

``console.health`` decides whether something needs a human and
``console.charts`` counts rows; this module turns both into what a
support person reads: one sentence per check with its figure and a link to
the rows behind it, charts with a table behind each, and one way of writing
an instant (``when``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from accounts.models import Channel
from console import charts, svgchart
from console.health import Check
from console.svgchart import Chart, Series
from core.config import NudgeConfig
from core.display import duration, plural, when
from pacing import pacer
from scheduled_sends.lateness import BUCKETS
from scheduled_sends.models import Outcome

BEYOND_LAST_BUCKET = BUCKETS[-2]  # the histogram's last finite bound

# --- health -------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthLine:
    """One check, as a sentence; ``link`` leads to the rows behind it."""

    name: str
    ok: bool
    sentence: SafeString
    link: str = ""
    link_text: str = ""
    warning: bool = False  # passing, with something to look at: never "all clear"


@dataclass(frozen=True)
class Links:
    """Where a line may send the reader; empty where the reader may not look."""

    queue: str = ""
    runs: str = ""

    @classmethod
    def for_user(cls, user) -> Links:
        def allowed(model: str) -> bool:
            return user.has_perm(f"scheduled_sends.view_{model}") or user.has_perm(
                f"scheduled_sends.change_{model}"
            )

        return cls(
            queue=reverse("admin:scheduled_sends_scheduledsend_changelist")
            if allowed("scheduledsend")
            else "",
            runs=reverse("admin:scheduled_sends_sweeprun_changelist")
            if allowed("sweeprun")
            else "",
        )

    def to_queue(self, query: str) -> str:
        return f"{self.queue}?{query}" if self.queue else ""

    def to_runs(self, query: str) -> str:
        return f"{self.runs}?{query}" if self.runs else ""


def _sweep_line(sweep: str, figures: dict[str, Any], links: Links, config: NudgeConfig) -> Callable:
    # A deliver run that succeeds may still have sent nothing (every send failing):
    # this line says only that the sweep runs; the sends' own checks say what came of it.
    doing = {"deliver": "Deliver is running", "materialize": "Upcoming nudges are being queued"}
    not_doing = {
        "deliver": "Nudges are not being sent",
        "materialize": "Upcoming nudges are not being queued",
    }

    def line(check) -> HealthLine:
        last = figures.get(f"last_{sweep}_at")
        runs = links.to_runs(f"sweep__exact={sweep}")
        if check.ok:
            text = format_html(
                "{}: the last {} run succeeded at {}.", doing[sweep], sweep, when(last)
            )
            return HealthLine(check.name, True, text, runs, f"{sweep} runs")
        limit: timedelta = getattr(config, f"{sweep}_stale_after")
        if last is None:
            text = format_html("{}: no {} run has succeeded yet.", not_doing[sweep], sweep)
        else:
            text = format_html(
                "{}: no {} run has succeeded since {} (the limit is {}).",
                not_doing[sweep],
                sweep,
                when(last),
                duration(limit.total_seconds()),
            )
        return HealthLine(check.name, False, text, runs, f"view {sweep} runs")

    return line


def _failed_run_line(sweep: str, links: Links) -> Callable:
    def line(check) -> HealthLine:
        query = f"sweep__exact={sweep}&status__exact=failed"
        if check.ok:
            text = format_html("The last {} run did not fail.", sweep)
        else:
            text = format_html("The last {} run failed: {}", sweep, check.detail.split(": ", 1)[-1])
        return HealthLine(check.name, check.ok, text, links.to_runs(query), "view failed runs")

    return line


def health_lines(
    report_checks: list, figures: dict[str, Any], links: Links, config: NudgeConfig
) -> list[HealthLine]:
    """Every check as a sentence, failing ones first."""
    overdue = duration(config.overdue_after.total_seconds())
    lease = duration(config.lease.total_seconds())

    def rls(check) -> HealthLine:
        if check.ok:
            text = format_html(
                "{}", "Each tenant's data is fenced: row-level security is enforced."
            )
        else:
            text = format_html("Row-level security is NOT enforced: {}", check.detail)
        return HealthLine(check.name, check.ok, text)

    def overdue_unclaimed(check) -> HealthLine:
        n = int(figures.get("overdue_unclaimed") or 0)
        link = links.to_queue("due=overdue")
        if not n:
            text = format_html("Nothing due over {} ago is waiting unclaimed.", overdue)
            return HealthLine(check.name, True, text)
        text = format_html(
            "{} due over {} ago {} unclaimed.",
            plural(n, "nudge"),
            overdue,
            "is" if n == 1 else "are",
        )
        return HealthLine(check.name, False, text, link, "view them")

    def stuck(check) -> HealthLine:
        n = int(figures.get("stuck_claims") or 0)
        if not n:
            text = format_html("No claim is older than the lease ({}).", lease)
            return HealthLine(check.name, True, text)
        text = format_html(
            "{} older than the lease ({}): the deliver run holding {} died.",
            plural(n, "claim is", "claims are"),
            lease,
            "it" if n == 1 else "them",
        )
        return HealthLine(check.name, False, text, links.to_queue("state=stuck"), "view them")

    def keeping_up(check) -> HealthLine:
        n = int(figures.get("overdue_seen_by_materialize") or 0)
        at = when(figures.get("last_materialize_at"))
        if not n:
            text = format_html("Delivery was keeping up when the queue was last checked ({}).", at)
            return HealthLine(check.name, True, text)
        if check.ok:  # true when materialize looked, cleared by the deliver runs since
            text = format_html(
                "Delivery has caught up: when the queue was last checked ({}), {} whose time "
                "had passed {} unsent; deliver has sent or settled {} since.",
                at,
                plural(n, "nudge"),
                "was" if n == 1 else "were",
                "it" if n == 1 else "them",
            )
            return HealthLine(check.name, True, text)
        text = format_html(
            "When the queue was last checked ({}), {} whose time had passed "
            "{} still unsent and unclaimed.",
            at,
            plural(n, "nudge"),
            "was" if n == 1 else "were",
        )
        return HealthLine(check.name, False, text, links.to_queue("due=overdue"), "view them")

    def on_time(check) -> HealthLine:
        p95 = figures.get("lateness_p95_bucket_seconds")
        sent = int(figures.get("sent_last_15_min") or 0)
        limit = round(config.max_p95_lateness.total_seconds())
        if p95 is None:
            text = format_html("{}", "No nudge was sent in the last 15 minutes, so none was late.")
        elif p95 == float("inf"):
            text = format_html(
                "Nudges are going out late: of {} in the last 15 minutes, the slowest 5% "
                "arrived more than {} after their time (limit {} s).",
                plural(sent, "nudge") + " sent",
                duration(BEYOND_LAST_BUCKET),
                limit,
            )
        else:
            text = format_html(
                "{}: 95% of the {} in the last 15 minutes arrived within {} s of their time "
                "(limit {} s).",
                "Nudges are on time" if check.ok else "Nudges are going out late",
                plural(sent, "nudge") + " sent",
                f"{p95:g}",
                limit,
            )
        return HealthLine(check.name, check.ok, text, "#lateness", "see the lateness chart")

    def nothing_expired(check) -> HealthLine:
        n = int(figures.get("expired_last_15_min") or 0)
        if not n:
            text = format_html("{}", "No nudge expired unsent in the last 15 minutes.")
            return HealthLine(check.name, True, text)
        text = format_html(
            "{} expired unsent in the last 15 minutes: {} never reached the user.",
            plural(n, "nudge"),
            "it" if n == 1 else "they",
        )
        return HealthLine(check.name, False, text, links.to_queue("state=expired"), "view expired")

    def calendar_push(check) -> HealthLine:
        text = format_html("Calendar push: {}.", check.detail)
        return HealthLine(check.name, check.ok, text)

    def queue_partitions(check) -> HealthLine:
        text = format_html("Queue partitions: {}.", check.detail)
        return HealthLine(check.name, check.ok, text)

    def queue_readable(check) -> HealthLine:
        text = format_html("The sweeper role cannot read the queue: {}", check.detail)
        return HealthLine(check.name, check.ok, text)

    def channels_configured(check) -> HealthLine:
        if check.ok:
            text = format_html("{}", "No send failed on our own channel configuration.")
            return HealthLine(check.name, True, text)
        text = format_html(
            "Sends are failing on our channel configuration — fix the setting named here: {}.",
            check.detail,
        )
        return HealthLine(
            check.name,
            False,
            text,
            links.to_queue("failure_kind__exact=configuration"),
            "view them",
        )

    def sends_succeeding(check) -> HealthLine:
        if check.ok and not check.warning:
            text = format_html("{}", "No send failed at a provider in the last 15 minutes.")
            return HealthLine(check.name, True, text)
        verdict = "Sends are failing" if not check.ok else "Some sends failed"
        text = format_html("{}: {}.", verdict, check.detail)
        return HealthLine(
            check.name,
            check.ok,
            text,
            links.to_queue("state=failed"),
            "view failed sends",
            warning=check.warning,
        )

    # One sentence per check, and no fallback: a new check without its
    # sentence fails here (and in tests/admin/test_index.py), not quietly on the page.
    sentences: dict[Check, Callable] = {
        Check.ROW_LEVEL_SECURITY: rls,
        Check.DELIVER_RECENT: _sweep_line("deliver", figures, links, config),
        Check.MATERIALIZE_RECENT: _sweep_line("materialize", figures, links, config),
        Check.DELIVER_LAST_RUN: _failed_run_line("deliver", links),
        Check.MATERIALIZE_LAST_RUN: _failed_run_line("materialize", links),
        Check.OVERDUE_UNCLAIMED: overdue_unclaimed,
        Check.STUCK_CLAIMS: stuck,
        Check.DELIVERY_KEEPING_UP: keeping_up,
        Check.QUEUE_READABLE: queue_readable,
        Check.NUDGES_ON_TIME: on_time,
        Check.NOTHING_EXPIRED: nothing_expired,
        Check.CALENDAR_PUSH: calendar_push,
        Check.QUEUE_PARTITIONS: queue_partitions,
        Check.CHANNELS_CONFIGURED: channels_configured,
        Check.SENDS_SUCCEEDING: sends_succeeding,
    }
    missing = set(Check) - set(sentences)
    if missing:
        raise LookupError(f"health checks without a console sentence: {sorted(missing)}")
    lines = [sentences[Check(check.name)](check) for check in report_checks]
    return sorted(lines, key=lambda line: (line.ok, not line.warning))


def figure_lines(figures: dict[str, Any], links: Links) -> list[HealthLine]:
    """The figures alone, when no health report could be made."""
    stuck = int(figures.get("stuck_claims") or 0)
    return [
        HealthLine(
            "last_deliver",
            True,
            format_html("Last successful deliver run: {}.", when(figures.get("last_deliver_at"))),
        ),
        HealthLine(
            "last_materialize",
            True,
            format_html(
                "Last successful materialize run: {}.", when(figures.get("last_materialize_at"))
            ),
        ),
        HealthLine(
            "due_backlog",
            True,
            format_html(
                "{} due and not yet sent.", plural(int(figures.get("due_backlog") or 0), "nudge")
            ),
        ),
        HealthLine(
            "stuck_claims",
            not stuck,
            format_html("{} older than the lease.", plural(stuck, "claim is", "claims are")),
            links.to_queue("state=stuck") if stuck else "",
            "view them",
        ),
    ]


def pacing_lines(states: list[pacer.BudgetState]) -> list[HealthLine]:
    """Each shared rate in force, as a sentence: at its setting, or lowered by a
    provider's 429 (and climbing back), or paused by its Retry-After."""
    lines = []
    for state in states:
        calendar = state.budget.startswith(("google", "graph"))
        scale, unit = (60, "/min") if calendar else (1, "/s")
        rate, ceiling = state.rate * scale, state.ceiling * scale
        if state.lowered:
            text = format_html(
                "{} paced at {}{} of its configured {}{}: lowered by a 429, climbing back.",
                state.budget,
                f"{rate:,.1f}",
                unit,
                f"{ceiling:,.1f}",
                unit,
            )
        else:
            text = format_html(
                "{} paced at its configured {}{}.", state.budget, f"{ceiling:,.1f}", unit
            )
        if state.paused_for >= 1:
            paused = duration(state.paused_for)
            text = format_html("{} Paused for {} more (Retry-After).", text, paused)
        lines.append(HealthLine(f"pacing_{state.budget}", True, text))
    return lines


# --- charts ---------------------------------------------------------------------------

COLOURS = {
    Outcome.SENT: "#2e7d32",
    Outcome.SKIPPED: "#8d8d8d",
    Outcome.FAILED: "#c62828",
    Outcome.EXPIRED: "#ef6c00",
    "retried": "#1565c0",
    Channel.WHATSAPP: "#1b8a3a",
    Channel.TELEGRAM: "#2374b8",
    Channel.CONSOLE: "#6d6d6d",
    "": "#a0a0a0",
    "capacity": "#c62828",
    "p50": "#2374b8",
    "p95": "#ef6c00",
    "max": "#c62828",
}
CHANNEL_NAMES = {**dict(Channel.choices), "": "Channel not chosen yet"}


@dataclass
class Panel:
    """One chart: its picture, what it shows in a sentence, and its figures as a table."""

    panel_id: str
    title: str
    svg: SafeString
    caption: str
    head: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    table_note: str = ""


def _relative_ticks(slots: int, step: int, label: Callable[[int], str]) -> dict[int, str]:
    """A label every ``step`` slots and on the last, leaving out a regular one that
    would sit too close to the last (their text would overlap)."""
    regular = {i: label(i) for i in range(0, slots, step) if slots - 1 - i >= step}
    return regular | {slots - 1: label(slots - 1)}


def look_ahead_panels(data: charts.LookAhead, *, prefix: str, one_user: bool) -> list[Panel]:
    """One chart per channel: nudges per planned minute, and the minute's capacity."""
    ticks = _relative_ticks(
        data.minutes, 30, lambda i: "now" if i == 0 else f"+{i // 60}h{i % 60:02d}"
    )
    panels = []
    for channel, counts in data.per_channel.items():
        name = CHANNEL_NAMES.get(channel, channel)
        capacity = None if one_user else data.capacity.get(channel)
        lines = []
        if capacity:
            lines.append(
                Series(
                    "capacity per minute",
                    [capacity] * data.minutes,
                    COLOURS["capacity"],
                    dashed=True,
                )
            )
        chart = Chart(
            f"{prefix}lookahead-{channel or 'unassigned'}",
            f"{name}: nudges per minute, next 3 hours",
            data.minutes,
            ticks,
            empty_text="No nudges planned in the next 3 hours.",
        )
        svg = svgchart.bar_chart(
            chart, [Series(f"{name} nudges", counts, COLOURS.get(channel, "#888"))], lines
        )
        peak = max(counts, default=0)
        caption = f"{plural(sum(counts), 'nudge')} planned; busiest minute {peak:,}"
        if not peak:
            caption = "Nothing planned"
        if capacity:
            caption += f"{' against' if peak else '; the channel carries'} {capacity:,} a minute"
            over = sum(1 for n in counts if n > capacity)
            if over:
                caption += f"; {plural(over, 'minute')} over capacity"
        rows = [
            [when(data.start + timedelta(minutes=i)), n, capacity if capacity else "unpaced"]
            for i, n in enumerate(counts)
            if n
        ]
        panels.append(
            Panel(
                chart.chart_id,
                chart.title,
                svg,
                caption + ".",
                ["minute", "nudges", "capacity"],
                rows,
                "Minutes not listed have no nudges.",
            )
        )
    return panels


def _seconds(value: float) -> str:
    return svgchart.figure(round(value, 1), "s")


def lateness_panels(data: charts.Lateness, config: NudgeConfig, *, prefix: str) -> list[Panel]:
    """p50 / p95 / max per quarter-hour, and how the day's lateness is spread."""
    slots = data.quarters
    ticks = _relative_ticks(
        slots, 16, lambda i: "now" if i == slots - 1 else f"-{(slots - i) // 4}h"
    )
    series = [
        Series(
            name,
            [
                getattr(data.by_quarter[i], name) if i in data.by_quarter else None
                for i in range(slots)
            ],
            COLOURS[name],
        )
        for name in ("p50", "p95", "max")
    ]
    threshold = round(config.max_p95_lateness.total_seconds())
    over = [q for q in data.by_quarter.values() if q.p95 > threshold]
    chart = Chart(
        f"{prefix}lateness",
        "Lateness of sent nudges per quarter-hour, last 24 hours (seconds)",
        slots,
        ticks,
        unit="s",
        empty_text="No nudges were sent in the last 24 hours.",
    )
    caption = f"{plural(data.sent, 'nudge')} sent"
    if data.by_quarter:
        worst = max(data.by_quarter.values(), key=lambda q: q.p95)
        caption += f"; worst quarter-hour p95 {_seconds(worst.p95)}"
        caption += f"; {plural(len(over), 'quarter-hour')} over the {threshold} s limit"
    lines = svgchart.line_chart(chart, series)
    histogram_chart = Chart(
        f"{prefix}lateness-histogram",
        "How late sent nudges were, last 24 hours",
        len(data.histogram),
        {i: _bucket_label(data.histogram, i) for i in range(len(data.histogram))},
        empty_text="No nudges were sent in the last 24 hours.",
    )
    histogram = svgchart.bar_chart(
        histogram_chart, [Series("nudges", [n for _, n in data.histogram], COLOURS["p50"])]
    )
    return [
        Panel(
            chart.chart_id,
            chart.title,
            lines,
            caption + ".",
            ["quarter-hour from", "sent", "p50", "p95", "max"],
            [
                [when(q.start), q.sent, _seconds(q.p50), _seconds(q.p95), _seconds(q.max)]
                for _, q in sorted(data.by_quarter.items())
            ],
            "Quarter-hours not listed sent nothing.",
        ),
        Panel(
            histogram_chart.chart_id,
            histogram_chart.title,
            histogram,
            "Each bar counts the nudges that arrived at most this late (0 s: on time or early).",
            ["lateness", "nudges"],
            [[_bucket_label(data.histogram, i), n] for i, (_, n) in enumerate(data.histogram)],
        ),
    ]


def _bucket_label(histogram: list[tuple[float, int]], i: int) -> str:
    bound = histogram[i][0]
    if bound == float("inf"):
        return f">{histogram[i - 1][0]:.0f}s"
    return f"≤{bound:.0f}s"


OUTCOME_ORDER = (Outcome.SENT, Outcome.SKIPPED, Outcome.FAILED, Outcome.EXPIRED)


def outcome_panels(data: charts.Outcomes, *, prefix: str) -> list[Panel]:
    """Outcomes per hour (stacked), retries as a line, and failures by reason."""
    slots = len(data.hours)
    ticks = _relative_ticks(
        slots, 4, lambda i: "this hour" if i == slots - 1 else f"-{slots - 1 - i}h"
    )
    stacks = [
        Series(str(outcome.value), [h.counts.get(outcome, 0) for h in data.hours], COLOURS[outcome])
        for outcome in OUTCOME_ORDER
    ]
    retried = Series(
        "retried",
        [h.retried for h in data.hours],
        COLOURS["retried"],
        dashed=True,
        mark_zero=False,
    )
    chart = Chart(
        f"{prefix}outcomes",
        "Outcomes per hour, last 24 hours (by the hour each nudge was meant for)",
        slots,
        ticks,
        empty_text="No nudges were settled in the last 24 hours.",
    )
    totals = ", ".join(f"{data.total(o):,} {o.value}" for o in OUTCOME_ORDER)
    panels = [
        Panel(
            chart.chart_id,
            chart.title,
            svgchart.bar_chart(chart, stacks, [retried]),
            f"{totals}; {data.retried:,} retried (had a failed attempt).",
            ["hour from", *[o.value for o in OUTCOME_ORDER], "retried"],
            [
                [when(h.start), *[h.counts.get(o, 0) for o in OUTCOME_ORDER], h.retried]
                for h in data.hours
            ],
        )
    ]
    reasons = data.failure_reasons
    palette = ("#c62828", "#ad1457", "#6a1b9a", "#4527a0", "#283593", "#00695c")
    failure_series = [
        Series(reason, [h.failures.get(reason, 0) for h in data.hours], palette[i % len(palette)])
        for i, (reason, _) in enumerate(reasons)
    ]
    reason_chart = Chart(
        f"{prefix}failures",
        "Failures per hour by reason, last 24 hours",
        slots,
        ticks,
        empty_text="No failures in the last 24 hours.",
    )
    panels.append(
        Panel(
            reason_chart.chart_id,
            reason_chart.title,
            svgchart.bar_chart(reason_chart, failure_series),
            "; ".join(f"{reason}: {n:,}" for reason, n in reasons) or "No failures.",
            ["hour from", "reason", "failures"],
            [
                [when(h.start), reason, n]
                for h in data.hours
                for reason, n in sorted(h.failures.items())
            ],
            "Hours not listed had no failures.",
        )
    )
    return panels


def activity_panels(
    now: datetime, config: NudgeConfig, user_id: int | None = None
) -> dict[str, list[Panel]]:
    """The three charts, for everyone or for one user (capacity only for everyone)."""
    prefix = f"user{user_id}-" if user_id is not None else ""
    return {
        "look_ahead": look_ahead_panels(
            charts.look_ahead(now, config, user_id), prefix=prefix, one_user=user_id is not None
        ),
        "lateness": lateness_panels(charts.lateness(now, config, user_id), config, prefix=prefix),
        "outcomes": outcome_panels(charts.outcomes(now, config, user_id), prefix=prefix),
    }
