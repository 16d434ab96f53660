"""What each live benchmark's command does around its measurements: the options they share
(`--output`, `--profile`) and their checks, the machine and the server measured, the load
average before and after, and the Markdown report printed to stdout and written to its file."""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from benchmarks.api import profile

RESULTS_DIR = Path(__file__).resolve().parent / "results"
_REPO = Path(__file__).resolve().parent.parent

Measured = TypeVar("Measured")


@dataclass(frozen=True)
class LoadAverages:
    """The machine's one-minute load average before and after the measurements."""

    before: float
    after: float


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_report_options(
    parser: argparse.ArgumentParser, *, report_name: str, profile_help: str
) -> None:
    """`--output` (default: results/<report_name>-<today>.md) and `--profile`."""
    parser.add_argument(
        "--output",
        type=Path,
        default=RESULTS_DIR / f"{report_name}-{datetime.date.today().isoformat()}.md",
        help="the report (default: %(default)s)",
    )
    parser.add_argument("--profile", action="store_true", help=profile_help)


def check_options(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    *,
    at_least_one: Sequence[str],
    make_target: str,
) -> None:
    """Exit with a usage error if a count is below 1, or `--profile` has no py-spy."""
    if min(getattr(args, name) for name in at_least_one) < 1:
        options = [f"--{name.replace('_', '-')}" for name in at_least_one]
        listed = ", ".join(options[:-1]) + " and " + options[-1] if len(options) > 1 else options[0]
        parser.error(f"{listed} must be >= 1")
    if args.profile and profile.py_spy_path() is None:
        parser.error(f"--profile needs py-spy (pip install py-spy; `make {make_target}` does)")


def measure_and_render(
    *,
    work_prefix: str,
    measure: Callable[[Path, Path | None], Measured],
    render: Callable[[Measured, LoadAverages], str],
    profile_base: Path | None,
) -> tuple[Measured, str]:
    """Run `measure(work directory, profile_base)` in a temporary directory; return what it
    measured and `render(what it measured, load averages)`."""
    before = os.getloadavg()
    progress(f"load average: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}")
    with tempfile.TemporaryDirectory(prefix=work_prefix) as work:
        measured = measure(Path(work), profile_base)
    return measured, render(measured, LoadAverages(before[0], os.getloadavg()[0]))


def report_to_file(
    args: argparse.Namespace, measure: Callable[[Path | None], tuple[Measured, str]]
) -> Measured:
    """Run `measure(profile base path or None)`, print the report it returns and write it to
    `args.output`; return what it measured."""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # Profiles are saved beside the report, named after it.
    profile_base = args.output.with_name(args.output.stem) if args.profile else None
    started = time.monotonic()
    measured, text = measure(profile_base)
    print(text)
    args.output.write_text(text)
    progress(f"wrote {args.output} in {time.monotonic() - started:.0f} s")
    return measured


def machine_description() -> str:
    """The machine and interpreter, as a report's first words: "2 cores (...), CPython 3.11.7"."""
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), {platform.python_implementation()} "
        f"{platform.python_version()}"
    )


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def server_source() -> str:
    """The commit measured, and whether the server's sources differed from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=_REPO, capture_output=True, text=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "python", "rust"],
            cwd=_REPO,
            capture_output=True,
            text=True,
        ).stdout.split("\n")
    except OSError:
        return "unknown commit"
    dirty = sum(1 for line in changed if line.strip())
    return f"commit {commit}" + (f" with {dirty} changed server source files" if dirty else "")


def rate_over_tenths(steps: list[tuple[float, int]], things: str) -> list[str]:
    """A Markdown table of the rate over each tenth of a run, from `(seconds, count)` readings
    polled during it; `things` names what is counted ("messages", "rows")."""
    lines = [f"{things.capitalize()} counted over the run (rate over each tenth):", ""]
    lines += [f"| seconds | {things} | {things}/s in the tenth |", "|---:|---:|---:|"]
    end = steps[-1][0]
    marks = [steps[0]]
    for tenth in range(1, 11):
        step = min(steps, key=lambda s: abs(s[0] - end * tenth / 10))
        if step[0] > marks[-1][0]:
            marks.append(step)
    for (t0, n0), (t1, n1) in itertools.pairwise(marks):
        lines.append(f"| {t1:.1f} | {n1:,} | {(n1 - n0) / (t1 - t0):,.0f} |")
    return lines
