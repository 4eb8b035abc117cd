"""Small server-rendered SVG charts (bars, lines), without JavaScript. Every mark carries
its figure (``data-value``) and a ``<title>``; charts scale with their ``viewBox``, and
``templates/admin/base_site.html`` enlarges their text on narrow screens."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from django.utils.safestring import SafeString, mark_safe

WIDTH = 760
HEIGHT = 220
MARGIN_LEFT = 64  # room for a y label at the enlarged phone size
FONT_SIZE = 13  # viewBox units: 9.6 px at a desktop's 560 px chart
DENSE_AXIS = 8  # more x labels than this: every other one is minor
MARGIN_RIGHT = 12
MARGIN_TOP = 12
MARGIN_BOTTOM = 28
PLOT_WIDTH = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
PLOT_HEIGHT = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM


@dataclass(frozen=True)
class Series:
    """One named row of figures, one per x slot (None: nothing to draw there)."""

    name: str
    values: Sequence[float | None]
    colour: str
    dashed: bool = False
    mark_zero: bool = True  # False: a zero is drawn by the line alone


@dataclass(kw_only=True)
class Chart:
    """One chart as the console shows it: an id, an accessible title, x-axis tick labels,
    the picture (bars stacked in ``stacks``' order, ``lines`` over them), its caption, and
    its table: a row per slot drawn (``slot_name``), a column per series (``also``: its own)."""

    chart_id: str
    title: str
    slots: int
    ticks: dict[int, str] = field(default_factory=dict)
    unit: str = ""
    empty_text: str = "Nothing to draw."
    caption: str
    slot_head: str
    slot_name: Callable[[int], str]
    table_note: str = ""
    stacks: list[Series] = field(default_factory=list)
    lines: list[Series] = field(default_factory=list)
    also: list[Series] = field(default_factory=list)

    @property
    def svg(self) -> SafeString:
        """Bars per slot, and lines over them (a gap where a value is None)."""
        stacks, lines = self.stacks, self.lines
        totals = [sum(s.values[i] or 0 for s in stacks) for i in range(self.slots)]
        line_values = [v for s in lines for v in s.values if v is not None]
        top = _axis_top([*totals, *line_values])
        slot = PLOT_WIDTH / max(self.slots, 1)
        gap = min(2.0, slot * 0.2)
        width = max(slot - gap, 0.5)
        marks: list[str] = []
        for i in range(self.slots):
            base = 0.0
            for series in stacks:
                value = series.values[i] or 0
                if not value:
                    continue
                x = MARGIN_LEFT + i * slot + gap / 2
                height = value / top * PLOT_HEIGHT
                y = MARGIN_TOP + PLOT_HEIGHT - (base + value) / top * PLOT_HEIGHT
                shape = f'x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" height="{height:.2f}"'
                marks.append(_mark("rect", "bar", shape, self, i, series, value))
                base += value
        marks.extend(_line(self, series, top, slot) for series in lines)
        drawn = any(self.shows(i) for i in range(self.slots))
        return _frame(self, top, marks, [*stacks, *lines], drawn)

    def shows(self, slot: int) -> bool:
        """Under bars, a reference line alone (capacity) is not data."""
        if self.stacks:
            return any(s.values[slot] for s in self.stacks)
        return any(s.values[slot] is not None for s in self.lines)

    @property
    def head(self) -> list[str]:
        unit = f" ({self.unit})" if self.unit else ""
        drawn = [f"{s.name}{unit}" for s in [*self.stacks, *self.lines]]
        return [self.slot_head, *[s.name for s in self.also], *drawn]

    @property
    def rows(self) -> list[list[str]]:
        columns = [*self.also, *self.stacks, *self.lines]
        return [
            [self.slot_name(i), *[_cell(s.values[i]) for s in columns]]
            for i in range(self.slots)
            if self.shows(i)
        ]


def _cell(value: float | None) -> str:
    return "-" if value is None else figure(value)


def _axis_top(values: Sequence[float]) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^n at or above every value; at least 2 for
    counts, which never get a half-way tick of 0.5."""
    value = max([*values, 0])
    counts = all(float(v).is_integer() for v in values)
    if value <= (2 if counts else 0):
        return 2.0 if counts else 1.0
    exponent = math.floor(math.log10(value))
    return float(min(s * 10**exponent for s in (1, 2, 2.5, 5, 10) if s * 10**exponent >= value))


def figure(value: float, unit: str = "") -> str:
    """A figure as a label: whole numbers without decimals, others to one place."""
    value = round(value, 1)
    text = f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return f"{text} {unit}".strip() if unit else text


def _line(chart: Chart, series: Series, top: float, slot: float) -> str:
    """A polyline through each run of values, and a point per value with its figure."""
    runs: list[list[str]] = [[]]
    points: list[str] = []
    for i, value in enumerate(series.values):
        if value is None:
            runs.append([])
            continue
        x = MARGIN_LEFT + (i + 0.5) * slot
        y = MARGIN_TOP + PLOT_HEIGHT - min(value, top) / top * PLOT_HEIGHT
        runs[-1].append(f"{x:.2f},{y:.2f}")
        if value == 0 and not series.mark_zero:
            continue
        shape = f'cx="{x:.2f}" cy="{y:.2f}" r="3"'
        points.append(_mark("circle", "point", shape, chart, i, series, value))
    dash = ' stroke-dasharray="5 3"' if series.dashed else ""
    polylines = "".join(
        f'<polyline class="line" data-series="{escape(series.name)}" fill="none" '
        f'stroke="{series.colour}" stroke-width="1.5"{dash} points="{" ".join(run)}"/>'
        for run in runs
        if len(run) > 1
    )
    return polylines + "".join(points)


def _mark(
    tag: str, css: str, shape: str, chart: Chart, slot: int, series: Series, value: float
) -> str:
    """One bar or point: its figure as ``data-value`` and, with its slot's tick, as a tooltip."""
    where = chart.ticks.get(slot, "")
    tip = f"{series.name}: {figure(value, chart.unit)}" + (f" ({where})" if where else "")
    return (
        f'<{tag} class="{css}" data-series="{escape(series.name)}" data-slot="{slot}" '
        f'data-value="{figure(value)}" {shape} fill="{series.colour}">'
        f"<title>{escape(tip)}</title></{tag}>"
    )


def _frame(
    chart: Chart, top: float, marks: list[str], series: Sequence[Series], drawn: bool
) -> SafeString:
    """Axes, grid, tick labels, legend and the marks; an empty chart says so in words."""
    parts = [
        f'<svg class="nudge-chart" id="{escape(chart.chart_id)}" role="img" '
        f'aria-labelledby="{escape(chart.chart_id)}-title" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'data-y-max="{figure(top)}" data-drawn="{"yes" if drawn else "no"}" '
        'xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" '
        f'font-size="{FONT_SIZE}">',
        f'<title id="{escape(chart.chart_id)}-title">{escape(chart.title)}</title>',
    ]
    for fraction in (0, 0.5, 1):
        y = MARGIN_TOP + PLOT_HEIGHT - fraction * PLOT_HEIGHT
        parts.append(
            f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.2f}" y2="{y:.2f}" '
            f'stroke="#ddd"/><text class="y-tick" x="{MARGIN_LEFT - 4}" y="{y + 4:.2f}" '
            f'text-anchor="end" fill="#555">{escape(figure(top * fraction, chart.unit))}</text>'
        )
    slot = PLOT_WIDTH / max(chart.slots, 1)
    dense = len(chart.ticks) > DENSE_AXIS
    for n, (i, label) in enumerate(sorted(chart.ticks.items())):
        x = MARGIN_LEFT + (i + 0.5) * slot
        anchor = "middle"
        if chart.slots >= 24:  # many slots: keep the first and last label inside the frame
            anchor = "start" if i == 0 else "end" if i == chart.slots - 1 else "middle"
        css = "x-tick minor" if dense and n % 2 else "x-tick"
        parts.append(
            f'<text class="{css}" x="{x:.2f}" y="{HEIGHT - 10}" text-anchor="{anchor}" '
            f'fill="#555">{escape(label)}</text>'
        )
    parts.extend(marks)
    if not drawn:
        parts.append(
            f'<text class="empty" x="{MARGIN_LEFT + PLOT_WIDTH / 2:.2f}" '
            f'y="{MARGIN_TOP + PLOT_HEIGHT / 2:.2f}" text-anchor="middle" font-size="14" '
            f'fill="#555">{escape(chart.empty_text)}</text>'
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="nudge-legend-item"><svg width="12" height="12" aria-hidden="true">'
        f'<rect width="12" height="12" fill="{s.colour}"/></svg> {escape(s.name)}</span>'
        for s in series
    )
    return mark_safe(  # noqa: S308 - every interpolated text above is escaped
        "".join(parts) + f'<div class="nudge-legend" aria-hidden="true">{legend}</div>'
    )
