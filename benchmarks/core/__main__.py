"""`make bench-core`: the core's micro-benchmarks as ratios against their Python baselines.

Each benchmark measures Postwire and its baseline side by side in one run; the whole set is
repeated `--rounds` times, alternating, and the median of each figure is reported, so the ratio
holds on a noisy machine. Prints a Markdown table; `--output FILE` also writes it there.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.core import dkim, mime, placeholders, spool


@dataclass(frozen=True)
class Comparison:
    key: str  # the ratio's name in reports and the release gate
    what: str
    unit: str
    postwire: str  # key of Postwire's rate in the benchmark's result
    baseline: str  # key of the baseline's rate
    target: float  # the ratio Postwire aims for


BENCHMARKS: dict[str, tuple[Callable[[float], dict[str, float]], list[Comparison]]] = {
    "dkim": (
        dkim.run,
        [
            Comparison(
                "dkim-rsa-2048/dkimpy",
                "DKIM RSA-2048 sign, 2 threads vs dkimpy",
                "sig/s",
                "postwire rsa-2048 sig/s (2 threads)",
                "dkimpy rsa-2048 sig/s",
                20.0,
            ),
            Comparison(
                "dkim-rsa-2048-1-thread/dkimpy",
                "DKIM RSA-2048 sign, 1 thread vs dkimpy",
                "sig/s",
                "postwire rsa-2048 sig/s (1 thread)",
                "dkimpy rsa-2048 sig/s",
                0.0,
            ),
            Comparison(
                "dkim-ed25519/dkimpy",
                "DKIM Ed25519 sign, 2 threads vs dkimpy",
                "sig/s",
                "postwire ed25519 sig/s (2 threads)",
                "dkimpy ed25519 sig/s",
                20.0,
            ),
        ],
    ),
    "mime": (
        mime.run,
        [
            Comparison(
                "mime-build/email",
                "MIME build vs email.message.EmailMessage",
                "msg/s",
                "mime_core_messages_per_s",
                "mime_python_email_messages_per_s",
                10.0,
            )
        ],
    ),
    "spool": (
        spool.run,
        [
            Comparison(
                "spool-group-commit/one-commit-each",
                "Durable 4 KiB mail enqueues, group commit vs one commit each",
                "msg/s",
                "postwire group commit",
                "lmdb one commit per message",
                0.0,
            ),
            Comparison(
                "spool-group-commit-incompressible/one-commit-each",
                "Durable 4 KiB random-byte enqueues, group commit vs one commit each",
                "msg/s",
                "postwire group commit, incompressible",
                "lmdb one commit per message",
                0.0,
            ),
        ],
    ),
    "placeholders": (
        placeholders.run,
        [
            Comparison(
                "placeholders-compiled/re-sub",
                "10 KiB html, 5 placeholders: compiled once vs re.sub per message",
                "msg/s",
                "placeholders compiled renders/s",
                "placeholders re.sub renders/s",
                0.0,
            )
        ],
    ),
}

# Absolute goals that are not ratios: (benchmark, key, minimum).
ABSOLUTE_TARGETS = [
    ("spool", "postwire group commit", 50_000.0),
    # A broadcast renders html, text and subject per contact: far under 50 us for the html.
    ("placeholders", "placeholders compiled renders/s", 20_000.0),
]


def measure(rounds: int, seconds: float, only: list[str]) -> dict[str, dict[str, float]]:
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in only}
    for round_number in range(1, rounds + 1):
        for name in only:
            print(f"round {round_number}/{rounds}: {name} ...", file=sys.stderr, flush=True)
            run, _ = BENCHMARKS[name]
            for key, value in run(seconds).items():
                samples[name].setdefault(key, []).append(value)
    return {
        name: {key: statistics.median(values) for key, values in figures.items()}
        for name, figures in samples.items()
    }


def measured_comparisons(
    medians: dict[str, dict[str, float]],
) -> Iterator[tuple[Comparison, float, float]]:
    """Each comparison of the benchmarks measured, with Postwire's and the baseline's figure."""
    for name, figures in medians.items():
        for c in BENCHMARKS[name][1]:
            yield c, figures[c.postwire], figures[c.baseline]


def ratios(medians: dict[str, dict[str, float]]) -> dict[str, float]:
    """Postwire / baseline of each comparison measured, by its key."""
    return {c.key: ours / base for c, ours, base in measured_comparisons(medians)}


def report(medians: dict[str, dict[str, float]], rounds: int, seconds: float) -> str:
    lines = [
        f"# Core micro-benchmarks, {datetime.date.today().isoformat()}",
        "",
        f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"median of {rounds} rounds of {seconds:g} s each.",
        "",
        "| comparison | Postwire | baseline | ratio | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for c, ours, base in measured_comparisons(medians):
        ratio = ours / base
        verdict = "met" if ratio >= c.target else "MISSED"
        target = f">= {c.target:g}x {verdict}" if c.target else "-"
        lines.append(
            f"| {c.what} | {ours:,.0f} {c.unit} | {base:,.0f} {c.unit} | {ratio:,.1f}x | {target} |"
        )
    for name, key, minimum in ABSOLUTE_TARGETS:
        if name in medians:
            value = medians[name][key]
            verdict = "met" if value >= minimum else "MISSED"
            lines.append(
                f"| {key} (absolute) | {value:,.0f}/s | | | >= {minimum:,.0f}/s {verdict} |"
            )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options (`--only` defaults to every benchmark)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.core", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per figure and round")
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS))
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    args.only = args.only or list(BENCHMARKS)
    return args


def main() -> None:
    args = parse_args()
    table = report(measure(args.rounds, args.seconds, args.only), args.rounds, args.seconds)
    print(table)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(table)


if __name__ == "__main__":
    main()
