"""`make bench-insights`: messages/s with deliverability insights and event counters on
(`insights.enabled`, `metrics.count_events`: the defaults) against both off, through the SMTP
relay benchmark's path and the batch REST API benchmark's, side by side in one run. The goal:
at most 5% fewer messages/s with both on (a ratio on/off of at least 0.95).

Two `postwire serve` run at once, identical but for those two keys (and the DKIM selector of
their sending domain, so that both publish their keys in the one Knot DNS on loopback), each
relaying to the same Postfix `smtp-sink`: the SMTP benchmark's server (`SmtpBenchServer`:
implicit-TLS submission from a trusted network, every recipient routed to the sink, `processes`
as given) fed by `smtp-source -d` through a stunnel client, and the REST batch benchmark's
load (`POST /emails/batch`, 100 emails a call from 4 client threads). A run is one of the
delivery and SMTP benchmarks' own rounds (`run_round`, with their checks: every message at the
sink, every email "delivered" per the API), followed by a wait until the server is quiet again
(under 10% of a core over half a second): insights are computed off the send path, so a run is
only over once the server has caught up with them, and the next run starts on a quiet machine.

Each round, the two ways of sending in rotating order, each with both servers in alternating
order (on first in one, off first in the next). Figures per run: delivered/s (the benchmarks'
own: messages over the first accept to the last message at the sink), settled/s (messages over
the run's start to the server being quiet again: the sustained rate, deferred work included),
and the server's CPU per message over the same time; and, for each server, its CPU over all
the timed rounds (work it put off past its quiet point, a periodic sweep say, lands in the other
server's runs and counts here) over the messages it took. Ratios on/off are medians of the
rounds' ratios. Progress goes to stderr, the Markdown report to stdout and to `--output`. With
`--profile`, an extra run of each way through the server with both on runs under py-spy, and
the report gives the share of insights, event counters and operator metrics in it.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tests.dns_server import AuthoritativeDnsServer

from benchmarks.api import profile
from benchmarks.api.profile import Profiled, profile_section
from benchmarks.cpu_time import process_tree_cpu
from benchmarks.delivery.sink import SmtpSink
from benchmarks.gate import Threshold
from benchmarks.insights_cost.runs import (
    OFF,
    ON,
    POST_THREADS,
    QUIET_SHARE,
    QUIET_WINDOW,
    SLUGS,
    Figure,
    Run,
    Side,
    check_ways_and_peers,
    one_run,
    start_side,
    stop_sides,
)
from benchmarks.report import (
    LoadAverages,
    add_report_options,
    check_options,
    machine_description,
    measure_and_render,
    progress,
    report_to_file,
    server_source,
)
from benchmarks.smtp import __main__ as smtp

GOAL = 0.95
# What the profile's parts are, as py-spy names frames.
PROFILE_PARTS = {
    "insights (`postwire/insights/`, `store/email_insights.py`)": (
        "(postwire/insights/",
        "(postwire/store/email_insights.py)",
    ),
    "event counters (`metrics/counters.py`, `store/metric_counters.py`)": (
        "(postwire/metrics/counters.py)",
        "(postwire/store/metric_counters.py)",
    ),
    "domain health (`metrics/domain_health.py`)": ("(postwire/metrics/domain_health.py)",),
    "operator metrics (`metrics/operator_*.py`)": ("(postwire/metrics/operator_",),
}
# The goals the full report states (`make bench`): settled/s on over off, per way.
GOALS = [
    Threshold(f"insights.{slug}.settled.on/off", GOAL, f"insights and counters cost <= 5% ({way})")
    for way, slug in SLUGS.items()
]


@dataclass
class Measured:
    figures: list[Figure]
    profiles: list[Profiled]
    # Side -> its processes' CPU over every timed round (between runs too: the other side's
    # runs, when work it put off may run) over the messages it took, in ms.
    whole_cpu_ms: dict[str, float]
    server: str  # the commit the servers started from (others may commit during the run)


def run_benchmark(args: argparse.Namespace, work: Path, profile_base: Path | None) -> Measured:
    dns, sink = AuthoritativeDnsServer(), SmtpSink()
    server = server_source()
    sides: list[Side] = []
    dns.start()
    try:
        sink.start()
        for on in (True, False):
            sides.append(start_side(work, dns, sink, args.processes, on=on))

        def run(side: Side, way: str, messages: int, label: str) -> Run:
            return one_run(side, way, messages, sink, label, args.deliver_timeout)

        for side in sides:
            for way in args.ways:
                progress(f"warm-up: {args.warmup} messages, {way}, {side.name} ...")
                run(side, way, args.warmup, "warm-up")
        figures = {(way, side.name): Figure(way, side.name) for way in args.ways for side in sides}
        cpu_before = {side.name: process_tree_cpu(side.server.pid) for side in sides}
        for number in range(args.rounds):
            label = f"round {number + 1}/{args.rounds}"
            ways = args.ways[number % 2 :] + args.ways[: number % 2]
            for index, way in enumerate(ways):
                turn = (number + index) % 2
                for side in sides[turn:] + sides[:turn]:
                    measured = run(side, way, args.messages, label)
                    figures[way, side.name].runs.append(measured)
                    progress(
                        f"{label} {way} {side.name}: {measured.delivered_per_s:,.0f} "
                        f"delivered/s, {measured.settled_per_s:,.0f} settled/s, "
                        f"{measured.cpu_ms_per_message:.2f} ms CPU a message"
                    )
        messages = args.rounds * len(args.ways) * args.messages
        whole_cpu_ms = {
            side.name: 1000 * (process_tree_cpu(side.server.pid) - cpu_before[side.name]) / messages
            for side in sides
        }
        profiles: list[Profiled] = []
        for way in args.ways if profile_base is not None else ():
            slug = SLUGS[way]
            assert profile_base is not None
            raw = profile_base.with_name(f"{profile_base.name}-profile-{slug}.txt")
            progress(f"profiling an extra {way} run, {ON} -> {raw} ...")
            load = partial(run, sides[0], way, args.profile_messages, "profiled run")
            profile.record(sides[0].server.pid, args.profile_seconds, raw, "raw", load)
            collapsed = raw.read_text()
            title = f"the {way} with {ON} (an extra run of {args.profile_messages:,} messages)"
            parts = profile.inclusive_shares(collapsed, PROFILE_PARTS)
            profiles.append(Profiled(title, None, raw.name, profile.hot_spots(collapsed), parts))
        return Measured(list(figures.values()), profiles, whole_cpu_ms, server)
    except BaseException:
        for side in sides:
            progress(f"server log ({side.name}, tail):\n" + side.server.log())
        raise
    finally:
        stop_sides(sides, sink, dns)


def ratios(figures: list[Figure], way: str, value: str) -> list[float]:
    """On/off per round, for `value` of `way`'s runs."""
    by_side = {f.side: f for f in figures if f.way == way}
    pairs = zip(by_side[ON].runs, by_side[OFF].runs, strict=True)
    return [float(getattr(on, value) / getattr(off, value)) for on, off in pairs]


def named_figures(figures: list[Figure]) -> dict[str, float]:
    """The release gate's names: `insights.smtp.settled.on/off` and the like (medians)."""
    named = {}
    for way in dict.fromkeys(figure.way for figure in figures):
        slug = SLUGS[way]
        for value, word in (("settled_per_s", "settled"), ("delivered_per_s", "delivered")):
            named[f"insights.{slug}.{word}.on/off"] = statistics.median(ratios(figures, way, value))
    return named


def report(args: argparse.Namespace, measured: Measured, load: LoadAverages) -> str:
    figures = measured.figures
    lines = [
        f"# Cost of insights and counters, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}. Two `postwire serve` side by side (`processes = "
        f"{args.processes}` each), identical but for `insights.enabled` and "
        "`metrics.count_events` (both on, the defaults, against both off; no rspamd), relaying "
        f"to one Postfix `smtp-sink`. SMTP relay: `smtp-source -d -s {smtp.SESSIONS}` through "
        "stunnel, implicit TLS, a trusted network. REST batch: `POST /emails/batch`, 100 "
        f"emails a call, {POST_THREADS} client threads. {args.messages:,} messages of 4 KiB a "
        f"run; {args.rounds} rounds, each running both ways (their order rotates) on both "
        f"servers (taking turns going first). Load average before {load.before:.2f}, after "
        f"{load.after:.2f}. Server: {measured.server}.",
        "",
        "| way | server | delivered/s | settled/s | server CPU a message |",
        "|---|---|---:|---:|---:|",
    ]
    for figure in figures:
        lines.append(
            f"| {figure.way} | {figure.side} | {figure.median('delivered_per_s'):,.0f} "
            f"| {figure.median('settled_per_s'):,.0f} "
            f"| {figure.median('cpu_ms_per_message'):.2f} ms |"
        )
    lines += [
        "",
        f"| way | on/off, settled/s | on/off, delivered/s | on/off, CPU a message | goal: "
        f"settled/s >= {GOAL} |",
        "|---|---:|---:|---:|---|",
    ]
    for way in args.ways:
        settled = statistics.median(ratios(figures, way, "settled_per_s"))
        delivered = statistics.median(ratios(figures, way, "delivered_per_s"))
        cpu = statistics.median(ratios(figures, way, "cpu_ms_per_message"))
        verdict = "met" if settled >= GOAL else "MISSED"
        lines.append(f"| {way} | {settled:.3f} | {delivered:.3f} | {cpu:.3f} | {verdict} |")
    lines += [
        "",
        "Delivered/s: messages over the time from the first accept to smtp-sink's count of the "
        "last one (the SMTP and delivery benchmarks' own figure). Settled/s: messages over the "
        "time from the run's start to the server being quiet again (under "
        f"{QUIET_SHARE:.0%} of a core over {QUIET_WINDOW:g} s), so that work done after "
        "delivery (insights are computed off the send path) counts. Server CPU a message: "
        "the server's processes' CPU seconds over the same time, over the messages. After "
        'each run, untimed: every email of the run read "delivered" through the API. Ratios '
        "are medians of the rounds' ratios, on over off: 0.95 means 5% fewer messages/s with "
        "both on.",
        "",
        "Server CPU over every timed round, idle time between its runs and work done during "
        "the other server's runs included, over the messages it took: "
        + "; ".join(f"{side} {ms:.2f} ms a message" for side, ms in measured.whole_cpu_ms.items())
        + f" (on/off {measured.whole_cpu_ms[ON] / measured.whole_cpu_ms[OFF]:.3f}).",
        "",
        "Per round, on/off (settled/s; delivered/s):",
        "",
        "| round | " + " | ".join(args.ways) + " |",
        "|---:|" + "---:|" * len(args.ways),
    ]
    per_way = {
        way: list(zip(ratios(figures, way, "settled_per_s"),
                      ratios(figures, way, "delivered_per_s"), strict=True))
        for way in args.ways
    }  # fmt: skip
    for index in range(args.rounds):
        cells = [f"{per_way[way][index][0]:.3f}; {per_way[way][index][1]:.3f}" for way in args.ways]
        lines.append(f"| {index + 1} | " + " | ".join(cells) + " |")
    for profiled in measured.profiles:
        lines += profile_section(
            profiled,
            why_the_gil="each process's Trio thread runs submission, the API, delivery and "
            "(in the last process) the insights service; every process's samples count together",
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.insights_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=2000, help="4 KiB messages a run")
    parser.add_argument("--warmup", type=int, default=300, help="messages a way and server")
    parser.add_argument("--processes", type=int, default=2, help="each server's `processes`")
    parser.add_argument("--deliver-timeout", type=float, default=300.0)
    parser.add_argument(
        "--ways", default=",".join(SLUGS.values()), help="which ways to run: smtp, batch or both"
    )
    add_report_options(
        parser,
        report_name="insights",
        profile_help="profile an extra run of each way with both on (py-spy)",
    )
    parser.add_argument("--profile-seconds", type=int, default=5, help="shorter than the run")
    parser.add_argument("--profile-messages", type=int, default=8000, help="the profiled runs'")
    args = parser.parse_args(argv)
    check_options(
        parser, args, at_least_one=("rounds", "messages", "warmup", "processes"),
        make_target="bench-insights",
    )  # fmt: skip
    check_ways_and_peers(parser, args, make_target="bench-insights")
    return args


def measure(args: argparse.Namespace, profile_base: Path | None) -> tuple[Measured, str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-insights-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load: report(args, measured, load),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    report_to_file(args, partial(measure, args))


if __name__ == "__main__":
    main()
