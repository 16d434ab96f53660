"""The dashboard's SVG charts against golden files: the same data draws the same bytes, with
no inline style (the CSP forbids it), tooltips in <title>, and labels escaped. Run with
`POSTWIRE_UPDATE_GOLDEN=1` to rewrite the files after a deliberate change, then review the
diff (and look at them: they open in any browser)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from markupsafe import Markup

from postwire.dashboard.charts import (
    Series,
    bar_chart,
    line_chart,
    nice_ceiling,
    short_number,
    y_axis,
)

GOLDEN = Path(__file__).parent / "golden" / "charts"
DAYS = ["19 Nov", "20 Nov", "21 Nov", "22 Nov", "23 Nov", "24 Nov", "25 Nov"]


def matches_golden(name: str, svg: Markup) -> None:
    path = GOLDEN / f"{name}.svg"
    if os.environ.get("POSTWIRE_UPDATE_GOLDEN"):
        path.write_text(str(svg) + "\n")
    assert str(svg) + "\n" == path.read_text(), f"{name}.svg changed"


def well_formed(svg: Markup) -> ElementTree.Element:
    root = ElementTree.fromstring(str(svg))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "style=" not in str(svg)  # the CSP has no 'unsafe-inline' for styles
    return root


def test_stacked_bars() -> None:
    svg = bar_chart(
        "Delivery outcomes",
        DAYS,
        [
            Series("Delivered", "delivered", "#12a150", [120, 340, 0, 95, 410, 388, 52]),
            Series("Bounced", "bounced", "#d92d20", [3, 12, 0, 1, 30, 8, 0]),
        ],
    )
    root = well_formed(svg)
    bars = root.findall("{http://www.w3.org/2000/svg}rect")
    assert len(bars) == 11  # zero values draw nothing
    assert "25 Nov: Delivered 52" in svg
    matches_golden("stacked_bars", svg)


def test_lines_with_a_unit() -> None:
    svg = line_chart(
        "Bounce and complaint rates",
        DAYS,
        [
            Series("Bounce rate", "bounce_rate", "#d92d20", [2.44, 3.41, 0.0, 1.04, 6.82, 2.02, 0]),
            Series("Complaint rate", "complaint_rate", "#b54708", [0, 0.29, 0, 0, 0.24, 0, 0]),
        ],
        unit="%",
    )
    well_formed(svg)
    assert "20 Nov: Bounce rate 3.41%" in svg
    matches_golden("rate_lines", svg)


def test_empty_range_draws_an_empty_frame() -> None:
    svg = bar_chart("Emails sent", DAYS, [Series("Sent", "sent", "#1f5fbf", [0] * 7)])
    root = well_formed(svg)
    assert root.findall("{http://www.w3.org/2000/svg}rect") == []
    matches_golden("empty", svg)


def test_labels_and_names_are_escaped() -> None:
    svg = bar_chart("<b>", ['"x"<'], [Series("a&b", "sent", "#000", [1])])
    well_formed(svg)
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "a&amp;b" in svg


def test_many_buckets_keep_the_x_labels_few() -> None:
    labels = [f"{h:02d}:00" for h in range(720)]
    svg = line_chart(
        "Opens", labels, [Series("Opened", "opened", "#7a5af8", [h % 7 for h in range(720)])]
    )
    well_formed(svg)
    ticks = re.findall(r'text-anchor="middle"[^>]*>([^<]*)<', str(svg))
    assert 1 < len(ticks) <= 8
    assert "<circle" not in svg  # no dots past 200 points


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (1, 1), (3, 5), (7, 10), (12, 20), (180, 200), (501, 1000)]
)
def test_nice_ceiling(value: float, ceiling: float) -> None:
    assert nice_ceiling(value) == ceiling


@pytest.mark.parametrize(
    ("highest", "axis"), [(0, (1, 1)), (1, (1, 1)), (3, (3, 3)), (440, (600, 3)), (6.82, (8, 4))]
)
def test_y_axis(highest: float, axis: tuple[float, int]) -> None:
    assert y_axis(highest) == axis


@pytest.mark.parametrize(
    ("value", "text"), [(0, "0"), (2.5, "2.5"), (950, "950"), (1500, "1.5k"), (3_000_000, "3M")]
)
def test_short_number(value: float, text: str) -> None:
    assert short_number(value) == text
