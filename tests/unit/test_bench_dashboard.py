"""The dashboard benchmark's arithmetic: medians of the rounds against the p99 goal, and the
table row a page gets."""

from __future__ import annotations

import pytest
from benchmarks.api.__main__ import Figure
from benchmarks.api.load import Sample, Workload
from benchmarks.dashboard.__main__ import (
    busy_machine_warning,
    cpu_ms_a_request,
    figure_row,
    verdict,
)


def sample(
    p50_ms: float, p99_ms: float, requests: int = 1000, errors: int = 0, other_cpu: float = 0.05
) -> Sample:
    return Sample(requests, 10.0, errors, p50_ms, p99_ms, 1.0, 0.1, other_cpu)


@pytest.mark.parametrize(
    ("p99_ms", "expected"),
    [(0.0, "met"), (49.9, "met"), (50.0, "**not met**"), (80.0, "**not met**")],
)
def test_the_goal_is_a_p99_under_50_ms(p99_ms: float, expected: str) -> None:
    assert verdict(p99_ms) == expected


def test_a_row_has_the_medians_of_the_rounds_and_the_worst_p99() -> None:
    figure = Figure(Workload("first page", "GET", "/emails", None, 0), 4)
    figure.samples += [sample(3.0, 20.0, 900), sample(5.0, 60.0, 1100), sample(4.0, 30.0, 1000, 2)]
    assert figure_row(figure) == (
        "| first page | `/emails` | 100 | 4.0 ms | 30.0 ms | 60.0 ms | 2 | met |"
    )


def test_the_cpu_a_request_is_the_cores_busy_over_the_rate() -> None:
    figure = Figure(Workload("first page", "GET", "/emails", None, 0), 4)
    # 1.0 core busy at 100, 125 and 200 requests/s: 10, 8 and 5 ms of CPU a page.
    figure.samples += [sample(3.0, 20.0, 1000), sample(3.0, 20.0, 1250), sample(3.0, 20.0, 2000)]
    assert cpu_ms_a_request(figure) == 8.0


@pytest.mark.parametrize(("other_cpu", "warned"), [(0.05, False), (0.5, False), (1.8, True)])
def test_a_busy_machine_is_said_in_the_report(other_cpu: float, warned: bool) -> None:
    figure = Figure(Workload("first page", "GET", "/emails", None, 0), 4)
    figure.samples += [sample(3.0, 20.0, other_cpu=other_cpu)] * 3
    assert bool(busy_machine_warning([figure])) == warned
