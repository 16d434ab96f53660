"""`make bench-store-backends`: Postwire with its tables on LMDB (the embedded default) against
its tables on PostgreSQL, side by side in one run, on one node. Message bodies and the delivery
queue stay in the node's LMDB spool either way; on PostgreSQL a batch that spans both stores is
split (the tables' part committed first, then the spool's: `store/two_stores.py`).

PostgreSQL is Debian's 15 on loopback, fsync on as in a real deployment, `pg_stat_statements`
loaded. Two parts (`--parts`):

1. Sending: two `postwire serve` (`processes` each), identical but for their table store,
   relaying to one Postfix `smtp-sink`, run through the insights benchmark's runs: the SMTP
   relay (`smtp-source -d -s 50` -> stunnel -> implicit TLS -> Postwire, DKIM-signed, 4 KiB)
   and the REST batch path (`POST /emails/batch`, 100 emails a call, 4 client threads). Each
   round runs both ways (their order rotates) on both servers (taking turns going first).
   Figures per run: accepted/s, delivered/s (first accept to the last message at the sink),
   settled/s (to the server being quiet again) and the server's CPU a message (its processes'
   utime+stime to that point, over the messages); for the server on PostgreSQL, PostgreSQL's
   own cost a message (`postgres_traffic.py`: transactions, statements by kind, WAL bytes, the
   bytes and data segments on its connections, its CPU). Medians of the rounds; the ratios are
   PostgreSQL over LMDB, medians of the rounds' ratios. The goal: the relay on PostgreSQL at
   0.8x or more of LMDB's delivered/s.
2. Lists: `--emails` emails and `--contacts` contacts seeded through the store into a server on
   each store in turn (`lists.py`), then wrk (4 connections) on the Emails list (API and
   dashboard, first page and a filtered page) and contact search (the dashboard's address
   search, the API's lookup by address): p50 and p99, medians of the rounds.

With `--profile`, an extra run of each way through the server on PostgreSQL runs under py-spy
and the report names where its time goes. Progress goes to stderr, the Markdown report to
stdout and to `--output`.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tests.postgres_server import PostgresServer, postgres_binaries

from benchmarks.api.profile import profile_section
from benchmarks.insights_cost.runs import POST_THREADS, SLUGS, check_ways_and_peers
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
from benchmarks.store_backends.lists import Listed, run_lists
from benchmarks.store_backends.postgres_traffic import preload_statement_statistics
from benchmarks.store_backends.sending import LMDB, POSTGRESQL, Figure, Sending, run_sending

GOAL = 0.8
PARTS = ("sending", "lists")


@dataclass
class Measured:
    sending: Sending | None
    listed: list[Listed] = field(default_factory=list)
    server: str = ""


def run_benchmark(args: argparse.Namespace, work: Path, profile_base: Path | None) -> Measured:
    postgres = PostgresServer(durable=True)
    progress("starting PostgreSQL 15 (fsync on, pg_stat_statements) ...")
    postgres.start()
    try:
        preload_statement_statistics(postgres)
        measured = Measured(None, server=server_source())
        if "sending" in args.parts:
            url = postgres.create_database()
            database = url.rsplit("/", 1)[-1]
            measured.sending = run_sending(args, work, postgres, database, profile_base)
        if "lists" in args.parts:
            for name in (LMDB, POSTGRESQL):
                store = ""
                if name == POSTGRESQL:
                    store = (
                        f'\n[store]\nbackend = "postgresql"\nurl = "{postgres.create_database()}"\n'
                    )
                measured.listed.append(run_lists(args, work, name, store))
        return measured
    finally:
        postgres.destroy()


def ratios(figures: list[Figure], way: str, value: str) -> list[float]:
    """PostgreSQL over LMDB per round, for `value` of `way`'s runs."""
    by_store = {f.store: f for f in figures if f.way == way}
    pairs = zip(by_store[POSTGRESQL].runs, by_store[LMDB].runs, strict=True)
    return [float(getattr(pg, value) / getattr(lmdb, value)) for pg, lmdb in pairs]


def sending_report(args: argparse.Namespace, sending: Sending) -> list[str]:
    figures = sending.figures
    lines = [
        "## Sending: the SMTP relay and the REST batch path",
        "",
        "| way | tables on | accepted/s | delivered/s | settled/s | server CPU a message |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for f in figures:
        lines.append(
            f"| {f.way} | {f.store} | {f.median('accepted_per_s'):,.0f} "
            f"| {f.median('delivered_per_s'):,.0f} | {f.median('settled_per_s'):,.0f} "
            f"| {f.median('cpu_ms_per_message'):.2f} ms |"
        )
    lines += [
        "",
        f"| way | PostgreSQL / LMDB: accepted/s | delivered/s | settled/s | CPU a message "
        f"| goal: relay delivered/s >= {GOAL} |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for way in args.ways:
        cells = [
            statistics.median(ratios(figures, way, value))
            for value in ("accepted_per_s", "delivered_per_s", "settled_per_s")
        ]
        cpu = statistics.median(ratios(figures, way, "cpu_ms_per_message"))
        verdict = ("met" if cells[1] >= GOAL else "MISSED") if way == "SMTP relay" else ""
        lines.append(
            f"| {way} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {cpu:.3f} | {verdict} |"
        )
    lines += [
        "",
        "PostgreSQL's cost a message (the server on PostgreSQL; medians of the rounds):",
        "",
        "| way | transactions | write transactions (BEGIN) | statements by kind | round trips "
        "(data segments sent) | bytes sent | bytes received | WAL bytes | PostgreSQL CPU |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for f in figures:
        if f.store != POSTGRESQL:
            continue
        kinds = ", ".join(
            f"{kind} {n:.2f}" for kind, n in sorted(f.statements().items(), key=lambda kv: -kv[1])
        )
        lines.append(
            f"| {f.way} | {f.traffic_median('transactions'):.2f} "
            f"| {f.traffic_median('write_transactions'):.3f} | {kinds} "
            f"| {f.traffic_median('sends'):.2f} | {f.traffic_median('bytes_sent'):,.0f} "
            f"| {f.traffic_median('bytes_received'):,.0f} | {f.traffic_median('wal_bytes'):,.0f} "
            f"| {f.traffic_median('cpu_ms'):.2f} ms |"
        )
    lines += [
        "",
        "Accepted/s: messages over the client's run (smtp-source's, or the batch calls'). "
        "Delivered/s: messages from the first accept to smtp-sink's count of the last. "
        "Settled/s: to the server being quiet again. Server CPU a message: the `postwire "
        "serve` processes' utime+stime from the run's start to quiet, over the messages "
        "(PostgreSQL's own CPU is its column in the second table). Transactions: "
        "`pg_stat_database.xact_commit` (a group commit of many batches is one; each read is "
        "one). Statements by kind: `pg_stat_statements` calls by first word (BEGIN: one a "
        "group commit, so write transactions). Round trips: the TCP data segments Postwire's "
        "connections sent to PostgreSQL (`ss -ti`, the kernel's `tcp_info`): pipelined "
        "statements leave together, so about one a round trip. Bytes: `tcp_info` bytes_acked "
        "and bytes_received of those connections. WAL bytes: `pg_stat_statements.wal_bytes`.",
    ]
    for profiled in sending.profiles:
        lines += profile_section(
            profiled,
            why_the_gil="each process's Trio thread runs submission, the API, delivery and the "
            "store's completions; every process's samples count together",
        )
    return lines


def lists_report(listed: list[Listed]) -> list[str]:
    lines = [
        "## Lists: the Emails list and contact search",
        "",
        "| page | "
        + " | ".join(f"{x.store} p50 | {x.store} p99" for x in listed)
        + " | p99 PostgreSQL / LMDB |",
        "|---|" + "---:|---:|" * len(listed) + "---:|",
    ]
    by_store = {x.store: x for x in listed}
    for index, page in enumerate(listed[0].pages):
        cells = []
        for x in listed:
            p = x.pages[index]
            cells += [f"{p.median('p50_ms'):.1f} ms", f"{p.median('p99_ms'):.1f} ms"]
        ratio = ""
        if LMDB in by_store and POSTGRESQL in by_store:
            pg = by_store[POSTGRESQL].pages[index].median("p99_ms")
            ratio = f"{pg / by_store[LMDB].pages[index].median('p99_ms'):.2f}"
        lines.append(f"| {page.name} | " + " | ".join(cells) + f" | {ratio} |")
    lines += [
        "",
        "Seeded with the server stopped: "
        + "; ".join(
            f"{x.store} {x.emails:,} emails and {x.contacts:,} contacts in {x.seed_seconds:.0f} s"
            for x in listed
        )
        + ". wrk, one thread, 4 keep-alive connections, medians of the rounds' p50 and p99; "
        "every page checked to answer 200 with rows before it is timed.",
    ]
    return lines


def report(args: argparse.Namespace, measured: Measured, load: LoadAverages) -> str:
    lines = [
        f"# Table store backends: LMDB against PostgreSQL, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}. PostgreSQL 15 on loopback, fsync on, `pg_stat_statements` "
        f"loaded. Load average before {load.before:.2f}, after {load.after:.2f}. Server: "
        f"{measured.server}.",
        "",
    ]
    if measured.sending is not None:
        lines += [
            f"Sending: `processes = {args.processes}` each, {args.messages:,} messages of 4 KiB "
            f"a run, {args.rounds} rounds; SMTP relay `smtp-source -d -s {smtp.SESSIONS}` "
            f"through stunnel (implicit TLS, DKIM-signed), REST batch 100 emails a call from "
            f"{POST_THREADS} threads.",
            "",
        ]
        lines += sending_report(args, measured.sending)
    if measured.listed:
        lines += ["", *lists_report(measured.listed)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.store_backends",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--parts", default=",".join(PARTS), help="sending and/or lists")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=5000, help="4 KiB messages a run")
    parser.add_argument("--warmup", type=int, default=500, help="messages a way and server")
    parser.add_argument("--processes", type=int, default=2, help="each server's `processes`")
    parser.add_argument("--deliver-timeout", type=float, default=300.0)
    parser.add_argument(
        "--ways", default=",".join(SLUGS.values()), help="which ways to send: smtp, batch or both"
    )
    parser.add_argument("--emails", type=int, default=1_000_000, help="seeded for the lists")
    parser.add_argument("--contacts", type=int, default=1_000_000, help="seeded for the lists")
    parser.add_argument("--list-rounds", type=int, default=3, help="wrk rounds a page")
    parser.add_argument("--seconds", type=int, default=5, help="of a wrk round")
    parser.add_argument("--warmup-seconds", type=int, default=2, help="of wrk a page, untimed")
    add_report_options(
        parser,
        report_name="store-backends",
        profile_help="profile an extra run of each way on PostgreSQL (py-spy)",
    )
    parser.add_argument("--profile-seconds", type=int, default=5, help="shorter than the run")
    parser.add_argument("--profile-messages", type=int, default=8000, help="the profiled runs'")
    args = parser.parse_args(argv)
    check_options(
        parser, args,
        at_least_one=("rounds", "messages", "warmup", "processes", "list_rounds", "seconds"),
        make_target="bench-store-backends",
    )  # fmt: skip
    args.parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    if not args.parts or any(p not in PARTS for p in args.parts):
        parser.error(f"--parts takes {' and/or '.join(PARTS)}, comma-separated")
    if args.emails < 1000 or args.contacts < 1000:
        parser.error("--emails and --contacts must be >= 1000")
    check_ways_and_peers(
        parser,
        args,
        make_target="bench-store-backends",
        peers=(("PostgreSQL 15", postgres_binaries()),),
    )
    return args


def measure(args: argparse.Namespace, profile_base: Path | None) -> tuple[Measured, str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-store-backends-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load: report(args, measured, load),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    report_to_file(args, partial(measure, args))


if __name__ == "__main__":
    main()
