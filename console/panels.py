"""The console's pictures: ``console.charts``' counts drawn as panels, each with a
caption and its figures as a table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from accounts.models import Channel
from console import charts, svgchart
from console.svgchart import Chart, Series
from core.config import NudgeConfig
from core.display import plural, when
from scheduled_sends.models import Kind, Outcome

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


def _relative_ticks(slots: int, step: int, label: Callable[[int], str]) -> dict[int, str]:
    """A label every ``step`` slots and on the last, leaving out a regular one that
    would sit too close to the last (their text would overlap)."""
    regular = {i: label(i) for i in range(0, slots, step) if slots - 1 - i >= step}
    return regular | {slots - 1: label(slots - 1)}


def look_ahead_panels(data: charts.LookAhead, *, prefix: str, one_user: bool) -> list[Chart]:
    """One chart per channel: nudges per planned minute, and the minute's capacity."""
    ticks = _relative_ticks(
        data.minutes, 30, lambda i: "now" if i == 0 else f"+{i // 60}h{i % 60:02d}"
    )
    panels = []
    for channel, counts in data.per_channel.items():
        name = CHANNEL_NAMES.get(channel, channel)
        capacity = None if one_user else data.capacity.get(channel)
        capacity_line = Series(
            "capacity per minute", [capacity] * data.minutes, COLOURS["capacity"], dashed=True
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
        panels.append(
            Chart(
                chart_id=f"{prefix}lookahead-{channel or 'unassigned'}",
                title=f"{name}: nudges per minute, next 3 hours",
                slots=data.minutes,
                ticks=ticks,
                empty_text="No nudges planned in the next 3 hours.",
                caption=caption + ".",
                slot_head="minute",
                slot_name=lambda i: when(data.start + timedelta(minutes=i)),
                table_note="Minutes not listed have no nudges.",
                stacks=[Series(f"{name} nudges", counts, COLOURS.get(channel, "#888"))],
                lines=[capacity_line] if capacity else [],
            )
        )
    return panels


def lateness_panels(data: charts.Lateness, config: NudgeConfig, *, prefix: str) -> list[Chart]:
    """p50 / p95 / max per quarter-hour, and how the day's lateness is spread."""
    slots = data.quarters
    quarters = [data.by_quarter.get(i) for i in range(slots)]
    series = [
        Series(name, [getattr(q, name) if q else None for q in quarters], COLOURS[name])
        for name in ("p50", "p95", "max")
    ]
    threshold = round(config.max_p95_lateness.total_seconds())
    over = [q for q in data.by_quarter.values() if q.p95 > threshold]
    caption = f"{plural(data.sent, 'nudge')} sent"
    if data.by_quarter:
        worst = max(data.by_quarter.values(), key=lambda q: q.p95)
        caption += f"; worst quarter-hour p95 {svgchart.figure(worst.p95, 's')}"
        caption += f"; {plural(len(over), 'quarter-hour')} over the {threshold} s limit"
    return [
        Chart(
            chart_id=f"{prefix}lateness",
            title="Lateness of sent nudges per quarter-hour, last 24 hours (seconds)",
            slots=slots,
            ticks=_relative_ticks(
                slots, 16, lambda i: "now" if i == slots - 1 else f"-{(slots - i) // 4}h"
            ),
            unit="s",
            empty_text="No nudges were sent in the last 24 hours.",
            caption=caption + ".",
            slot_head="quarter-hour from",
            slot_name=lambda i: when(data.by_quarter[i].start),
            table_note="Quarter-hours not listed sent nothing.",
            lines=series,
            also=[Series("sent", [q.sent if q else 0 for q in quarters], COLOURS[Outcome.SENT])],
        ),
        Chart(
            chart_id=f"{prefix}lateness-histogram",
            title="How late sent nudges were, last 24 hours",
            slots=len(data.histogram),
            ticks={i: _bucket_label(data.histogram, i) for i in range(len(data.histogram))},
            empty_text="No nudges were sent in the last 24 hours.",
            caption=(
                "Each bar counts the nudges that arrived at most this late (0 s: on time or early)."
            ),
            slot_head="lateness",
            slot_name=lambda i: _bucket_label(data.histogram, i),
            table_note="Lateness bounds not listed had no nudges.",
            stacks=[Series("nudges", [n for _, n in data.histogram], COLOURS["p50"])],
        ),
    ]


def _bucket_label(histogram: list[tuple[float, int]], i: int) -> str:
    bound = histogram[i][0]
    if bound == float("inf"):
        return f">{histogram[i - 1][0]:.0f}s"
    return f"≤{bound:.0f}s"


KIND_COLOURS = {Kind.EVENT: "#2374b8", Kind.FOLLOW_UP: "#6a1b9a", Kind.AGENDA: "#ef6c00"}
FAILURE_PALETTE = ("#c62828", "#ad1457", "#6a1b9a", "#4527a0", "#283593", "#00695c")


def outcome_panels(hours: list[charts.OutcomeHour], *, prefix: str) -> list[Chart]:
    """Outcomes per hour (stacked) with retries as a line, sent nudges by kind (events,
    follow-ups, the agenda), and failures by reason (most frequent first)."""
    slots = len(hours)
    hourly = partial(
        Chart,
        slots=slots,
        ticks=_relative_ticks(
            slots, 4, lambda i: "this hour" if i == slots - 1 else f"-{slots - 1 - i}h"
        ),
        slot_head="hour from",
        slot_name=lambda i: when(hours[i].start),
    )
    stacks = [
        Series(str(outcome.value), [h.counts[outcome] for h in hours], COLOURS[outcome])
        for outcome in Outcome
    ]
    retried = Series(
        "retried", [h.retried for h in hours], COLOURS["retried"], dashed=True, mark_zero=False
    )
    totals = ", ".join(f"{sum(s.values):,} {s.name}" for s in stacks)
    kind_stacks = [
        Series(kind.label, [h.sent_by_kind[kind] for h in hours], KIND_COLOURS[kind])
        for kind in Kind
    ]
    reasons: Counter[str] = sum((h.failures for h in hours), Counter())
    reasons_ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    failure_series = [
        Series(
            reason, [h.failures[reason] for h in hours], FAILURE_PALETTE[i % len(FAILURE_PALETTE)]
        )
        for i, (reason, _) in enumerate(reasons_ranked)
    ]
    return [
        hourly(
            chart_id=f"{prefix}outcomes",
            title="Outcomes per hour, last 24 hours (by the hour each nudge was meant for)",
            empty_text="No nudges were settled in the last 24 hours.",
            caption=f"{totals}; {sum(retried.values):,} retried (had a failed attempt).",
            table_note="Hours not listed settled nothing.",
            stacks=stacks,
            lines=[retried],
        ),
        hourly(
            chart_id=f"{prefix}kinds",
            title="Sent per hour by kind, last 24 hours",
            empty_text="Nothing was sent in the last 24 hours.",
            caption="; ".join(f"{s.name}: {sum(s.values):,}" for s in kind_stacks) + ".",
            table_note="Hours not listed sent nothing.",
            stacks=kind_stacks,
        ),
        hourly(
            chart_id=f"{prefix}failures",
            title="Failures per hour by reason, last 24 hours",
            empty_text="No failures in the last 24 hours.",
            caption="; ".join(f"{reason}: {n:,}" for reason, n in reasons_ranked) or "No failures.",
            table_note="Hours not listed had no failures.",
            stacks=failure_series,
        ),
    ]


def activity_panels(
    now: datetime, config: NudgeConfig, user_id: int | None = None
) -> dict[str, list[Chart]]:
    """The three charts, for everyone or for one user (capacity only for everyone)."""
    prefix = f"user{user_id}-" if user_id is not None else ""
    return {
        "look_ahead": look_ahead_panels(
            charts.look_ahead(now, config, user_id), prefix=prefix, one_user=user_id is not None
        ),
        "lateness": lateness_panels(charts.lateness(now, config, user_id), config, prefix=prefix),
        "outcomes": outcome_panels(charts.outcomes(now, config, user_id), prefix=prefix),
    }
