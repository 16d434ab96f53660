"""A grouped bar chart as a self-contained SVG file: the benchmarks' reports draw their headline
table with it, with nothing to install (no plotting library) and a file any browser shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

# One colour a series, in the order the series are named; readable by the colour-blind.
COLOURS = ("#1b6ca8", "#e69f00", "#8c8c8c", "#009e73", "#cc79a7", "#56b4e9")
WIDTH, HEIGHT = 900, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 50, 80
FONT = "font-family='sans-serif' font-size='12'"


@dataclass(frozen=True)
class Mark:
    """A dashed line across one group at `value`: a goal, say."""

    label: str
    value: float


@dataclass(frozen=True)
class Group:
    """Bars side by side, one a series (None: that series was not measured)."""

    label: str
    values: Sequence[float | None]
    marks: Sequence[Mark] = field(default_factory=tuple)


def bar_chart(title: str, unit: str, series: Sequence[str], groups: Sequence[Group]) -> str:
    """The SVG text of a chart of `groups`, each with one bar a name of `series`."""
    heights = [v for g in groups for v in g.values if v is not None]
    heights += [m.value for g in groups for m in g.marks]
    top = _nice_ceiling(max([1.0, *heights]))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    group_w = plot_w / max(1, len(groups))
    bar_w = group_w * 0.8 / max(1, len(series))

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' "
        f"viewBox='0 0 {WIDTH} {HEIGHT}'>",
        f"<rect width='{WIDTH}' height='{HEIGHT}' fill='white'/>",
        f"<text x='{WIDTH / 2}' y='24' text-anchor='middle' font-family='sans-serif' "
        f"font-size='16'>{escape(title)}</text>",
    ]
    for step in range(6):
        value = top * step / 5
        out.append(
            f"<line x1='{LEFT}' x2='{WIDTH - RIGHT}' y1='{y(value):.1f}' y2='{y(value):.1f}' "
            "stroke='#e0e0e0'/>"
        )
        out.append(
            f"<text x='{LEFT - 6}' y='{y(value) + 4:.1f}' text-anchor='end' {FONT}>"
            f"{value:,.0f}</text>"
        )
    out.append(
        f"<text x='16' y='{TOP + plot_h / 2}' transform='rotate(-90 16 {TOP + plot_h / 2})' "
        f"text-anchor='middle' {FONT}>{escape(unit)}</text>"
    )
    for index, group in enumerate(groups):
        x0 = LEFT + index * group_w + group_w * 0.1
        for position, bar in enumerate(group.values):
            if bar is None:
                continue
            x = x0 + position * bar_w
            out.append(
                f"<rect x='{x:.1f}' y='{y(bar):.1f}' width='{bar_w * 0.9:.1f}' "
                f"height='{TOP + plot_h - y(bar):.1f}' fill='{COLOURS[position % len(COLOURS)]}'>"
                f"<title>{escape(series[position])}: {bar:,.0f} {escape(unit)}</title></rect>"
            )
            out.append(
                f"<text x='{x + bar_w * 0.45:.1f}' y='{y(bar) - 4:.1f}' text-anchor='middle' "
                f"{FONT}>{bar:,.0f}</text>"
            )
        for mark in group.marks:
            out.append(
                f"<line x1='{x0 - group_w * 0.05:.1f}' x2='{x0 + group_w * 0.85:.1f}' "
                f"y1='{y(mark.value):.1f}' y2='{y(mark.value):.1f}' stroke='#c00000' "
                "stroke-dasharray='6 4'/>"
            )
            out.append(
                f"<text x='{x0 + group_w * 0.85:.1f}' y='{y(mark.value) - 4:.1f}' "
                f"text-anchor='end' fill='#c00000' {FONT}>{escape(mark.label)}</text>"
            )
        out.append(
            f"<text x='{x0 + group_w * 0.4:.1f}' y='{TOP + plot_h + 18}' text-anchor='middle' "
            f"{FONT}>{escape(group.label)}</text>"
        )
    out.append(
        f"<line x1='{LEFT}' x2='{WIDTH - RIGHT}' y1='{TOP + plot_h}' y2='{TOP + plot_h}' "
        "stroke='black'/>"
    )
    legend_x = LEFT
    for position, name in enumerate(series):
        legend_y = HEIGHT - 30
        out.append(
            f"<rect x='{legend_x}' y='{legend_y - 10}' width='12' height='12' "
            f"fill='{COLOURS[position % len(COLOURS)]}'/>"
        )
        out.append(f"<text x='{legend_x + 18}' y='{legend_y}' {FONT}>{escape(name)}</text>")
        legend_x += 30 + 7 * len(name)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 or 10 times a power of ten at or above `value` (>= 1): the
    axis's top, so that its five gridlines fall on round numbers."""
    power = 1.0
    while power * 10 < value:
        power *= 10
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)
