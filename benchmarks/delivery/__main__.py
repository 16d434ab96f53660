"""`make bench-delivery`: delivered messages/s, REST API (batch calls and single sends) ->
spool -> delivery engine -> Postfix's `smtp-sink`, with 4 KiB and 100 KiB messages, side by
side in one run.

A live `postwire serve` (the API benchmark's `BenchServer`: a subprocess on an ephemeral loopback
port, its sending domain verified for real against a Knot DNS server on loopback) routes mail for
example.org to an `smtp-sink` on loopback (`delivery.routes`), over at most
`delivery.max_connections_per_site` = 50 connections. One email must first go end to end
(accepted, received by smtp-sink, `last_event` "delivered") or the run fails.

Each round, for each way of sending (`--sends`: batch calls, single sends) and size in a
rotating order: N emails (one recipient each, uN@example.org, a plain-text body of that size)
are posted to `POST /emails/batch` 100 a call from a few client threads, or to `POST /emails`
one a call from more threads; accepted/s is N over the time from the first call sent to the
last reply, and a call's latency is its time from sent to replied (p50, p99). Delivered/s is N
over the time from the first reply (the first accept) to the moment smtp-sink counted the Nth
message. Then, untimed, the API must report `last_event` "delivered" for all N, or the run
fails. Medians of the rounds are reported; every wait is bounded.

Progress goes to stderr, the Markdown report to stdout and to `--output`. With `--profile`, an
extra 4 KiB round runs under py-spy (`--gil`) and the report names its hot spots.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
from tests.dns_server import AuthoritativeDnsServer

from benchmarks.api import profile
from benchmarks.api.profile import Profiled, profile_section
from benchmarks.api.server import verify_domain
from benchmarks.delivery.rounds import (
    BATCH_SIZE,
    CONFIRM_TIMEOUT,
    DOMAIN,
    MAX_CONNECTIONS,
    DeliveryBenchServer,
    Sample,
    Size,
    check_end_to_end,
    confirm_delivered,
    run_round,
)
from benchmarks.delivery.sink import SmtpSink, sink_path
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

# How each way of sending posts its emails: emails a call.
SENDS = {"batch": BATCH_SIZE, "single": 1}


@dataclass
class Figure:
    sends: str  # a key of SENDS
    size: Size
    samples: list[Sample] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.sends} {self.size.name}"

    def median(self, value: str) -> float:
        return statistics.median(float(getattr(s, value)) for s in self.samples)


def run_benchmark(
    args: argparse.Namespace, work: Path, profile_base: Path | None
) -> tuple[list[Figure], list[Profiled]]:
    sizes = [
        Size("4 KiB", 4 * 1024, args.messages_small),
        Size("100 KiB", 100 * 1024, args.messages_large),
    ]
    figures = [Figure(sends, size) for sends in args.sends for size in sizes]
    dns = AuthoritativeDnsServer()
    sink = SmtpSink()
    dns.start()
    server: DeliveryBenchServer | None = None
    try:
        sink.start()
        progress(f"smtp-sink listening on 127.0.0.1:{sink.port}")
        server = DeliveryBenchServer(work, dns.nameserver, sink.port, processes=args.processes)
        progress("starting postwire serve ...")
        server.start()
        token = server.create_key("bench")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:
            progress(f"verifying {DOMAIN} against Knot DNS at {dns.nameserver} ...")
            verify_domain(client, dns, DOMAIN)
            progress("checking that one email goes end to end ...")
            check_end_to_end(client, sink)

            def one(figure: Figure, label: str) -> Sample:
                assert server is not None
                sample, ids = run_round(
                    figure.size,
                    server.base_url,
                    token,
                    sink,
                    server.pid,
                    post_threads=args.post_threads
                    if figure.sends == "batch"
                    else args.single_threads,
                    deliver_timeout=args.deliver_timeout,
                    label=label,
                    batch_size=SENDS[figure.sends],
                )
                confirm_delivered(client, ids, CONFIRM_TIMEOUT)
                return sample

            for round_number in range(args.rounds):
                shift = round_number % len(figures)
                for figure in figures[shift:] + figures[:shift]:
                    label = f"round {round_number + 1}/{args.rounds} {figure.label}"
                    sample = one(figure, label)
                    figure.samples.append(sample)
                    progress(
                        f"{label}: {sample.delivered_per_s:,.0f} delivered/s "
                        f"({sample.deliver_seconds:.2f} s), "
                        f"accepted {sample.accepted_per_s:,.0f}/s, "
                        f"p50 {sample.p50_ms:.1f} ms, p99 {sample.p99_ms:.1f} ms, "
                        f"peak connections {sample.peak_connections}; "
                        f"CPU server {sample.server_cpu:.2f} smtp-sink {sample.sink_cpu:.2f} "
                        f"client {sample.client_cpu:.2f} other {sample.other_cpu:.2f}; "
                        "API confirms all delivered"
                    )

            profiles: list[Profiled] = []
            if profile_base is not None:
                raw = profile_base.with_name(f"{profile_base.name}-profile.txt")
                progress(f"profiling an extra {figures[0].label} round with py-spy -> {raw}")
                load = partial(one, figures[0], "profiled round")
                profile.record(server.pid, args.profile_seconds, raw, "raw", load)
                hot = profile.hot_spots(raw.read_text())
                profiles.append(
                    Profiled(
                        f"delivery of {figures[0].label} messages (an extra round)",
                        None,
                        raw.name,
                        hot,
                    )
                )
        return figures, profiles
    except BaseException:
        if server is not None:
            progress("server log (tail):\n" + server.log())
        raise
    finally:
        if server is not None:
            server.stop()
        sink.stop()
        dns.stop()


def report(
    args: argparse.Namespace,
    figures: list[Figure],
    profiles: list[Profiled],
    load_average: LoadAverages,
) -> str:
    lines = [
        f"# Delivery throughput, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}. REST API (batch: `POST /emails/batch`, {BATCH_SIZE} "
        f"emails a call, {args.post_threads} client threads; single: `POST /emails`, "
        f"{args.single_threads} client threads) -> spool -> delivery engine (Postwire with "
        f"`processes = {args.processes}`) -> Postfix "
        f"`smtp-sink` on loopback, `delivery.max_connections_per_site` = {MAX_CONNECTIONS}, one "
        f"recipient per email. Medians of {args.rounds} rounds per way of sending and size "
        "(their order rotates). Load average before "
        f"{load_average.before:.2f}, after {load_average.after:.2f}. Server: {server_source()}.",
        "",
        "| sends | message body | emails per round | delivered/s | accepted/s | end to end/s "
        "| p50 a call | p99 a call | first accept to last delivery | peak connections "
        "| server CPU | smtp-sink CPU | client CPU | other CPU |",
        "|---|---|" + "---:|" * 12,
    ]
    for figure in figures:
        lines.append(
            f"| {figure.sends} | {figure.size.name} | {figure.size.messages:,} "
            f"| {figure.median('delivered_per_s'):,.0f} | {figure.median('accepted_per_s'):,.0f} "
            f"| {figure.size.messages / figure.median('end_to_end_seconds'):,.0f} "
            f"| {figure.median('p50_ms'):.1f} ms | {figure.median('p99_ms'):.1f} ms "
            f"| {figure.median('deliver_seconds'):.2f} s "
            f"| {figure.median('peak_connections'):.0f} | {figure.median('server_cpu'):.2f} "
            f"| {figure.median('sink_cpu'):.2f} | {figure.median('client_cpu'):.2f} "
            f"| {figure.median('other_cpu'):.2f} |"
        )
    lines += [
        "",
        "Delivered/s: emails over the time from the first accepted call to smtp-sink's "
        "count of the last message (`smtp-sink -c`); after each round the API reported "
        '`last_event` "delivered" for every one of them. Accepted/s: emails over the time from '
        "the first call sent to the last reply. End to end/s: emails over the time from the first "
        "call sent to the last delivery. p50, p99: a call's time from sent to replied (a "
        "batch call carries 100 emails). Peak connections: established connections to "
        "smtp-sink, sampled every 50 ms (the cap is the config's 50). CPU columns are cores "
        "busy on average from the "
        "first call to the last delivery (2 = the whole machine): the server's processes, "
        "smtp-sink's, this benchmark's client (posting the emails; it shares the machine), and "
        "everything else.",
        "",
        "Per round (delivered/s; accepted/s):",
        "",
        "| round | " + " | ".join(f.label for f in figures) + " |",
        "|---:|" + "---:|" * len(figures),
    ]
    for index in range(args.rounds):
        cells = [
            f"{f.samples[index].delivered_per_s:,.0f}; {f.samples[index].accepted_per_s:,.0f}"
            for f in figures
        ]
        lines.append(f"| {index + 1} | " + " | ".join(cells) + " |")
    for profiled in profiles:
        lines += profile_section(
            profiled,
            why_the_gil="each process's Trio thread runs its work (the first: the API and a "
            "delivery engine; each worker: a delivery engine)",
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked (a usage error exits)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.delivery",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--processes", type=int, default=2, help="Postwire's `processes` (one per core here)"
    )
    parser.add_argument("--messages-small", type=int, default=5000, help="4 KiB emails a round")
    parser.add_argument("--messages-large", type=int, default=1000, help="100 KiB emails a round")
    parser.add_argument(
        "--sends",
        nargs="+",
        choices=list(SENDS),
        default=list(SENDS),
        help="batch calls (100 emails each) and/or single sends (default: both)",
    )
    parser.add_argument("--post-threads", type=int, default=4, help="concurrent batch calls")
    parser.add_argument("--single-threads", type=int, default=32, help="concurrent single sends")
    parser.add_argument(
        "--deliver-timeout", type=float, default=300.0, help="seconds a round may take"
    )
    add_report_options(
        parser, report_name="delivery", profile_help="profile an extra round (py-spy)"
    )
    parser.add_argument("--profile-seconds", type=int, default=3, help="shorter than a 4 KiB round")
    args = parser.parse_args(argv)
    check_options(
        parser,
        args,
        at_least_one=(
            "rounds",
            "messages_small",
            "messages_large",
            "post_threads",
            "single_threads",
        ),
        make_target="bench-delivery",
    )
    if sink_path() is None:
        parser.error("smtp-sink is not installed (apt-get install postfix; `make bench-delivery`)")

    return args


def measure(
    args: argparse.Namespace, profile_base: Path | None
) -> tuple[tuple[list[Figure], list[Profiled]], str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-delivery-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load_average: report(args, *measured, load_average),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    report_to_file(args, partial(measure, args))


if __name__ == "__main__":
    main()
