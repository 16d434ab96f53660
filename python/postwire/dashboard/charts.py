"""Charts as inline SVG, drawn on the server: they show without JavaScript, and the page's CSP
(no inline styles) holds, since colours are SVG presentation attributes (`fill=`, `stroke=`)
and classes, never `style=""`. Each bar and point carries a `<title>`, which browsers show as
a tooltip on hover.

Pure functions of their inputs: the same data gives the same bytes (golden-file tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup, escape

WIDTH: Final = 480
HEIGHT: Final = 220
_LEFT: Final = 40  # room for the y axis' labels
_RIGHT: Final = 8
_TOP: Final = 10
_BOTTOM: Final = 26  # room for the x axis' labels
_GRID_LINES: Final = 4  # at most
_MAX_X_LABELS: Final = 6


@dataclass(frozen=True, slots=True)
class Series:
    name: str  # shown in tooltips and the legend
    key: str  # the CSS class suffix: `series-{key}`
    colour: str  # its fill or stroke, as an SVG presentation attribute
    values: Sequence[int | float]


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (at least 1): the top
    of a y axis with round gridlines."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)  # pragma: no cover (the loop always returns)


def y_axis(highest: float) -> tuple[float, int]:
    """(top, gridlines) of a y axis for values up to `highest`: round steps (whole ones at
    least, as counts are), as few lines as cover the values."""
    step = nice_ceiling(highest / _GRID_LINES)
    lines = max(1, math.ceil(highest / step))
    return step * lines, lines


def short_number(value: float) -> str:
    """A tick label: 950, 1.5k, 12k, 3M."""
    if value >= 1_000_000:
        return _trim(value / 1_000_000) + "M"
    if value >= 1_000:
        return _trim(value / 1_000) + "k"
    return _trim(value)


def bar_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    axis_labels: Sequence[str] | None = None,
) -> Markup:
    """Stacked bars, one per label (a bucket of time), one layer per series, bottom up. The
    labels name the bars in tooltips; `axis_labels`, shorter, under the axis (default: the
    same)."""
    count = len(labels)
    totals = [sum(s.values[i] for s in series) for i in range(count)]
    top, lines = y_axis(max(totals, default=0))
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(count, 1)
    gap = min(slot * 0.2, 4.0)
    parts = _frame(title, axis_labels or labels, top, lines, slot)
    for i, label in enumerate(labels):
        base = 0.0
        x = _LEFT + i * slot + gap / 2
        for s in series:
            value = s.values[i]
            if value <= 0:
                continue
            height = plot_h * value / top
            y = _TOP + plot_h * (1 - (base + value) / top)
            parts.append(
                f'<rect class="bar series-{s.key}" x="{_n(x)}" y="{_n(y)}" '
                f'width="{_n(slot - gap)}" height="{_n(height)}" fill="{s.colour}">'
                f"<title>{escape(label)}: {escape(s.name)} {_count(value)}</title></rect>"
            )
            base += value
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    unit: str = "",
    axis_labels: Sequence[str] | None = None,
) -> Markup:
    """One line per series across the labels, a dot with a tooltip at each point (labels and
    `axis_labels` as for `bar_chart`)."""
    count = len(labels)
    top, lines = y_axis(max((v for s in series for v in s.values), default=0))
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(count, 1)
    parts = _frame(title, axis_labels or labels, top, lines, slot, unit=unit)
    for s in series:
        points = [
            (_LEFT + (i + 0.5) * slot, _TOP + plot_h * (1 - value / top))
            for i, value in enumerate(s.values)
        ]
        path = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        parts.append(
            f'<polyline class="line series-{s.key}" points="{path}" fill="none" '
            f'stroke="{s.colour}" stroke-width="2"/>'
        )
        if count <= 200:  # past that, dots are a smear: the line says it all
            for (x, y), label, value in zip(points, labels, s.values, strict=True):
                parts.append(
                    f'<circle class="dot series-{s.key}" cx="{_n(x)}" cy="{_n(y)}" r="3" '
                    f'fill="{s.colour}"><title>{escape(label)}: {escape(s.name)} '
                    f"{_count(value)}{unit}</title></circle>"
                )
    parts.append("</svg>")
    return Markup("".join(parts))


def _frame(
    title: str, labels: Sequence[str], top: float, lines: int, slot: float, unit: str = ""
) -> list[str]:
    """The svg element, its title, the gridlines with the y axis' labels and the x axis'."""
    plot_h = HEIGHT - _TOP - _BOTTOM
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img"><title>{escape(title)}</title>'
    ]
    for step in range(lines + 1):
        value = top * step / lines
        y = _TOP + plot_h * (1 - step / lines)
        parts.append(
            f'<line class="gridline" x1="{_LEFT}" y1="{_n(y)}" x2="{WIDTH - _RIGHT}" y2="{_n(y)}" '
            f'stroke="#e3e6ea" stroke-width="1"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{_n(y + 4)}" text-anchor="end" '
            f'font-size="11" fill="#5b6470">{short_number(value)}{unit}</text>'
        )
    every = max(1, math.ceil(len(labels) / _MAX_X_LABELS))
    for i in range(0, len(labels), every):
        x = _LEFT + (i + 0.5) * slot
        parts.append(
            f'<text class="tick" x="{_n(x)}" y="{HEIGHT - 8}" text-anchor="middle" '
            f'font-size="11" fill="#5b6470">{escape(labels[i])}</text>'
        )
    return parts


def _n(value: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _trim(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _count(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
