"""Named figures and the minimums they must reach: the release gate's, read from
`benchmarks/gate.toml`, and the goals the full report states. A figure's name says what it is:
`smtp.4kib.delivered.postwire/postfix-opendkim` is a ratio (Postwire's delivered/s of 4 KiB
messages over Postfix + OpenDKIM's), `smtp.100kib.delivered.postwire` a rate (messages/s)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class GateFileError(ValueError):
    """The gate file is not a `[minimum]` table of figure names and numbers."""


@dataclass(frozen=True)
class Threshold:
    figure: str
    minimum: float
    goal: str = ""  # the goal in words, where the report states one


@dataclass(frozen=True)
class Verdict:
    threshold: Threshold
    measured: float | None  # None: the figure was not measured

    @property
    def passed(self) -> bool:
        return self.measured is not None and self.measured >= self.threshold.minimum


def load(path: Path) -> list[Threshold]:
    """The `[minimum]` table of `path`: figure name = minimum."""
    try:
        with path.open("rb") as file:
            minimums = tomllib.load(file).get("minimum")
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise GateFileError(f"{path}: {error}") from error
    if not isinstance(minimums, dict) or not minimums:
        raise GateFileError(f"{path}: no [minimum] table of figure names and their minimums")
    thresholds = []
    for figure, minimum in minimums.items():
        # bool is an int to Python, and never a minimum.
        if isinstance(minimum, bool) or not isinstance(minimum, int | float):
            raise GateFileError(f"{path}: the minimum of {figure!r} is not a number: {minimum!r}")
        thresholds.append(Threshold(figure, float(minimum)))
    return thresholds


def check(thresholds: Sequence[Threshold], measured: Mapping[str, float]) -> list[Verdict]:
    return [Verdict(t, measured.get(t.figure)) for t in thresholds]


def figure_text(figure: str, value: float) -> str:
    """A ratio as "1.05x", a rate as "254/s"."""
    return f"{value:,.2f}x" if "/" in figure else f"{value:,.0f}/s"


def table(verdicts: Sequence[Verdict], *, passed: str = "pass", failed: str = "FAIL") -> list[str]:
    """A Markdown table: (goal,) figure, measured, minimum, and `passed` or `failed`."""
    goals = any(v.threshold.goal for v in verdicts)
    lines = [
        ("| goal " if goals else "") + "| figure | measured | minimum | |",
        ("|---" if goals else "") + "|---|---:|---:|---|",
    ]
    for verdict in verdicts:
        t = verdict.threshold
        measured = (
            "not measured" if verdict.measured is None else figure_text(t.figure, verdict.measured)
        )
        lines.append(
            (f"| {t.goal} " if goals else "")
            + f"| `{t.figure}` | {measured} | {figure_text(t.figure, t.minimum)} "
            f"| {passed if verdict.passed else failed} |"
        )
    return lines
