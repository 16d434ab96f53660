"""`make bench-api`: the REST API's throughput, three figures side by side in one run.

A live `postwire serve` (subprocess, ephemeral loopback port, no SMTP listeners) sends from a
domain verified for real against a Knot DNS server on loopback. `wrk` drives it from its own
process over keep-alive connections: `GET /health` (the framework's ceiling), single
`POST /emails`, and `POST /emails/batch` with 100 emails a call. One request of each kind is
checked first, so a broken endpoint cannot produce a fast number; then a warm-up, then
`--rounds` rounds, each running every figure once in a rotating order, and the median of each
figure is reported. The ratio of single sends to /health is the median of the rounds' ratios.

Progress goes to stderr, the Markdown report to stdout and to `--output`. With `--profile`,
extra rounds of single sends and of batch calls run under py-spy; their flamegraphs and collapsed
stacks are saved next to the report, whose hot-spot tables are drawn from them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from tests.dns_server import AuthoritativeDnsServer

from benchmarks.api import load, profile
from benchmarks.api.load import Sample, Workload
from benchmarks.api.profile import Profiled, profile_section
from benchmarks.api.server import BenchServer, verify_domain
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

DOMAIN = "bench-example.test"
BATCH_SIZE = 100
SINGLE_TARGET = 0.60  # single sends per /health request
BATCH_TARGET = 5_000.0  # emails/s through /emails/batch

# A typical transactional email: HTML with its text alternative, one recipient, one tag.
HTML = (
    "<!doctype html><html><body style='font-family:sans-serif'>"
    "<h1>Your order has shipped</h1>"
    "<p>Hi Ann,</p><p>Good news: order <b>#{n}</b> is on its way. It should arrive within "
    "three business days. You can follow the parcel on the carrier's site.</p>"
    "<table>"
    + "".join(
        f"<tr><td>Item {i}: a thing you will like</td><td>1</td><td>{9 + i}.90 EUR</td></tr>"
        for i in range(1, 9)
    )
    + "</table><p><a href='https://shop.example.org/orders/{n}'>View your order</a></p>"
    "<p>Thanks for shopping with us,<br>The Acme team</p></body></html>"
)
TEXT = (
    "Hi Ann,\n\nGood news: order #{n} is on its way. It should arrive within three business "
    "days.\n\nView your order: https://shop.example.org/orders/{n}\n\nThe Acme team\n"
)


def email(n: int) -> dict[str, Any]:
    return {
        "from": f"Acme <orders@{DOMAIN}>",
        "to": [f"customer{n}@example.org"],
        "subject": f"Your order #{n} has shipped",
        "html": HTML.replace("{n}", str(n)),
        "text": TEXT.replace("{n}", str(n)),
        "tags": [{"name": "category", "value": "shipping"}],
    }


@dataclass
class Figure:
    workload: Workload
    connections: int
    samples: list[Sample] = field(default_factory=list)

    @property
    def unit_per_request(self) -> int:
        return max(1, self.workload.emails_per_request)

    def median(self, value: str) -> float:
        return statistics.median(float(getattr(s, value)) for s in self.samples)

    def rates(self) -> list[float]:
        """Per round: requests/s, or emails/s for the email workloads."""
        return [s.requests_per_s * self.unit_per_request for s in self.samples]


def check_endpoints(client: httpx.Client) -> None:
    """One request of each kind must succeed before anything is timed."""
    health = client.get("/health")
    if health.status_code != 200 or health.json().get("status") != "ok":
        raise SystemExit(f"GET /health: {health.status_code} {health.text}")
    single = client.post("/emails", json=email(0))
    if single.status_code != 200 or not single.json().get("id"):
        raise SystemExit(f"POST /emails: {single.status_code} {single.text}")
    stored = client.get(f"/emails/{single.json()['id']}")
    if stored.status_code != 200 or stored.json().get("last_event") != "queued":
        raise SystemExit(f"GET /emails/{{id}} after a send: {stored.status_code} {stored.text}")
    batch = client.post("/emails/batch", json=[email(n) for n in range(BATCH_SIZE)])
    data = batch.json().get("data") if batch.status_code == 200 else None
    if not isinstance(data, list) or len(data) != BATCH_SIZE or not all(d.get("id") for d in data):
        raise SystemExit(f"POST /emails/batch: {batch.status_code} {batch.text[:500]}")


def run_benchmark(
    args: argparse.Namespace, work: Path, profile_base: Path | None
) -> tuple[list[Figure], list[Profiled]]:
    dns = AuthoritativeDnsServer()
    dns.start()
    server = BenchServer(work, dns.nameserver)
    try:
        progress("starting postwire serve ...")
        server.start()
        token = server.create_key("bench")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            progress(f"verifying {DOMAIN} against Knot DNS at {dns.nameserver} ...")
            verify_domain(client, dns, DOMAIN)
            progress("checking one request of each kind ...")
            check_endpoints(client)

        single_body, batch_body = work / "single.json", work / "batch.json"
        single_body.write_text(json.dumps(email(1)))
        batch_body.write_text(json.dumps([email(n) for n in range(BATCH_SIZE)]))
        single = Workload("POST /emails", "POST", "/emails", single_body, 1)
        figures = [
            Figure(Workload("GET /health", "GET", "/health", None, 0), args.connections),
            Figure(single, args.connections),
            Figure(
                Workload("POST /emails/batch", "POST", "/emails/batch", batch_body, BATCH_SIZE),
                args.batch_connections,
            ),
        ]

        def run(figure: Figure, seconds: int) -> Sample:
            return load.run_wrk(
                server.base_url,
                figure.workload,
                seconds=seconds,
                connections=figure.connections,
                token=token,
                server_pid=server.pid,
            )

        for figure in figures:
            progress(f"warm-up: {figure.workload.name} ...")
            run(figure, args.warmup)
        for round_number in range(args.rounds):
            # Rotate the order so that no figure always runs on the fullest spool.
            shift = round_number % len(figures)
            for figure in figures[shift:] + figures[:shift]:
                sample = run(figure, args.seconds)
                figure.samples.append(sample)
                rate = sample.requests_per_s * figure.unit_per_request
                progress(
                    f"round {round_number + 1}/{args.rounds}: {figure.workload.name}: "
                    f"{rate:,.0f}/s, p50 {sample.p50_ms:.1f} ms, p99 {sample.p99_ms:.1f} ms, "
                    f"errors {sample.errors}, CPU server {sample.server_cpu:.2f} "
                    f"wrk {sample.generator_cpu:.2f} other {sample.other_cpu:.2f}"
                )

        profiles: list[Profiled] = []
        if profile_base is not None:
            # The load outlasts the sampling window, so every sample falls under load.
            load_seconds = args.seconds + int(profile.ATTACH_SECONDS) + 2
            for figure, title, slug in (
                (figures[1], "single sends (`POST /emails`)", "single-send"),
                (figures[2], f"batch calls (`POST /emails/batch`, {BATCH_SIZE}/call)", "batch"),
            ):
                svg = profile_base.with_name(f"{profile_base.name}-{slug}.svg")
                raw = svg.with_suffix(".txt")
                for fmt, path in (("flamegraph", svg), ("raw", raw)):
                    progress(f"profiling {figure.workload.name} with py-spy -> {path} ...")
                    load_it = partial(run, figure, load_seconds)
                    profile.record(server.pid, args.seconds, path, fmt, load_it)
                hot = profile.hot_spots(raw.read_text())
                profiles.append(Profiled(title, svg.name, raw.name, hot))
        return figures, profiles
    except BaseException:
        progress("server log (tail):\n" + server.log())
        raise
    finally:
        server.stop()
        dns.stop()


def verdict(value: float, target: float) -> str:
    return "met" if value >= target else "MISSED"


def report(
    args: argparse.Namespace,
    figures: list[Figure],
    profiles: list[Profiled],
    load_average: LoadAverages,
) -> str:
    health, single, batch = figures
    single_ratios = [s / h for s, h in zip(single.rates(), health.rates(), strict=True)]
    ratio = statistics.median(single_ratios)
    batch_rate = statistics.median(batch.rates())
    batch_calls = statistics.median(s.requests_per_s for s in batch.samples)
    targets = {
        "GET /health": "framework ceiling",
        "POST /emails": f"{ratio:.0%} of /health; target >= {SINGLE_TARGET:.0%} "
        f"{verdict(ratio, SINGLE_TARGET)}",
        "POST /emails/batch": f"{batch_calls:,.1f} calls/s; target >= {BATCH_TARGET:,.0f} "
        f"emails/s {verdict(batch_rate, BATCH_TARGET)}",
    }
    units = {"GET /health": "req/s", "POST /emails": "emails/s", "POST /emails/batch": "emails/s"}
    lines = [
        f"# REST API throughput, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}, {load.wrk_version()} (1 thread). Medians of "
        f"{args.rounds} rounds of {args.seconds} s per figure, after a {args.warmup} s warm-up; "
        f"keep-alive connections: {args.connections} ({args.batch_connections} for batch, "
        f"whose calls carry {BATCH_SIZE} emails each). Load average before "
        f"{load_average.before:.2f}, after {load_average.after:.2f}. Server: {server_source()}.",
        "",
        "| figure | throughput | p50 | p99 | errors | server CPU | wrk CPU | other CPU "
        "| ratio / target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for figure in figures:
        name = figure.workload.name
        label = f"{name} ({BATCH_SIZE}/call)" if figure is batch else name
        latency = " per call" if figure is batch else ""
        lines.append(
            f"| {label} | {statistics.median(figure.rates()):,.0f} {units[name]} "
            f"| {figure.median('p50_ms'):.1f} ms{latency} | {figure.median('p99_ms'):.1f} ms "
            f"| {sum(s.errors for s in figure.samples)} | {figure.median('server_cpu'):.2f} "
            f"| {figure.median('generator_cpu'):.2f} | {figure.median('other_cpu'):.2f} "
            f"| {targets[name]} |"
        )
    lines += [
        "",
        "CPU columns are cores busy on average during a round (2 = the whole machine): the "
        "server's process (all threads), wrk's, and every other process on the machine. The "
        "generator shares the machine with the server; wrk's cost is what it took from it.",
        "",
        "Per round (throughput; order rotates each round):",
        "",
        "| round | " + " | ".join(f.workload.name for f in figures) + " | single / health |",
        "|---:|" + "---:|" * (len(figures) + 1),
    ]
    for index in range(args.rounds):
        cells = [f"{f.rates()[index]:,.0f}" for f in figures]
        lines.append(f"| {index + 1} | " + " | ".join(cells) + f" | {single_ratios[index]:.0%} |")
    for profiled in profiles:
        lines += profile_section(profiled, why_the_gil="that is where the API's throughput goes")
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked (a usage error exits)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.api",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=int, default=5, help="per figure and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2, help="seconds per figure, untimed")
    parser.add_argument("--connections", type=int, default=64, help="for /health and /emails")
    parser.add_argument(
        "--batch-connections",
        type=int,
        default=8,
        help="for /emails/batch: 8 calls keep 800 emails in flight; many more make one call "
        "take longer than a round",
    )
    add_report_options(
        parser,
        report_name="api",
        profile_help="also profile single sends and batch calls with py-spy (saved beside "
        "--output)",
    )
    args = parser.parse_args(argv)
    check_options(
        parser,
        args,
        at_least_one=("seconds", "rounds", "warmup", "connections", "batch_connections"),
        make_target="bench-api",
    )
    if load.wrk_path() is None:
        parser.error("wrk is not installed (Debian: apt-get install wrk; `make bench-api` does)")

    return args


def measure(
    args: argparse.Namespace, profile_base: Path | None
) -> tuple[tuple[list[Figure], list[Profiled]], str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-api-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load_average: report(args, *measured, load_average),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    figures, _ = report_to_file(args, partial(measure, args))
    if any(s.errors for f in figures for s in f.samples):
        progress("some requests failed during the timed rounds: the figures are not valid")
        sys.exit(1)


if __name__ == "__main__":
    main()
