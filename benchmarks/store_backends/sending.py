"""The sending half of the store backends benchmark: two `postwire serve`, identical but for
their table store (LMDB, the embedded default, or PostgreSQL), each relaying to one Postfix
`smtp-sink`, and the insights benchmark's runs through them: the SMTP relay and the REST batch
path, both servers in alternating order, with PostgreSQL's own counters read around each run
of the server on it (see `__main__.py`)."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tests.dns_server import AuthoritativeDnsServer
from tests.postgres_server import PostgresServer

from benchmarks.api import profile
from benchmarks.api.profile import Profiled
from benchmarks.delivery.sink import SmtpSink
from benchmarks.insights_cost.runs import SLUGS, Run, Side, one_run, open_side, stop_sides
from benchmarks.report import progress
from benchmarks.smtp import __main__ as smtp
from benchmarks.store_backends.postgres_traffic import Traffic, TrafficMeter

LMDB, POSTGRESQL = "LMDB", "PostgreSQL"
# Where the server on PostgreSQL spends its time, as py-spy names frames.
PROFILE_PARTS = {
    "table store (`store/table_store.py`)": ("(postwire/store/table_store.py)",),
    "the split batch (`store/two_stores.py`)": ("(postwire/store/two_stores.py)",),
    "waiting for tickets (`store/ticket_waiters.py`)": ("(postwire/store/ticket_waiters.py)",),
    "spool facade (`store/spool.py`)": ("(postwire/store/spool.py)",),
    "accept path (`postwire/accept.py`)": ("(postwire/accept.py)",),
    "delivery (`postwire/delivery/`)": ("(postwire/delivery/",),
    "aiosmtpd": ("(aiosmtpd/",),
}


class StoreBenchServer(smtp.SmtpBenchServer):
    """The SMTP benchmark's server with its tables in the store `store` names (a `[store]`
    table; empty: the spool's LMDB environment) and a DKIM selector of its own, so that both
    servers publish their keys in the one Knot DNS."""

    def __init__(
        self,
        directory: Path,
        nameserver: str,
        sink_port: int,
        *,
        processes: int,
        store: str,
        selector: str,
    ) -> None:
        directory.mkdir()
        super().__init__(
            directory,
            nameserver,
            sink_port,
            processes=processes,
            store=store,
            tables=f'[domains]\ndkim_selector = "{selector}"\n',
        )


@dataclass
class Figure:
    way: str
    store: str
    runs: list[Run] = field(default_factory=list)
    traffic: list[Traffic] = field(default_factory=list)  # PostgreSQL's, per run

    def median(self, value: str) -> float:
        return statistics.median(float(getattr(r, value)) for r in self.runs)

    def traffic_median(self, value: str) -> float:
        return statistics.median(float(getattr(t, value)) for t in self.traffic)

    def statements(self) -> dict[str, float]:
        """Statements a message by kind, medians over the runs."""
        kinds = dict.fromkeys(k for t in self.traffic for k in t.statements)
        return {k: statistics.median(t.statements.get(k, 0.0) for t in self.traffic) for k in kinds}


@dataclass
class Sending:
    figures: list[Figure]
    profiles: list[Profiled]


def start_sides(
    work: Path,
    dns: AuthoritativeDnsServer,
    sink: SmtpSink,
    processes: int,
    postgres_url: str,
) -> list[Side]:
    stores = {
        LMDB: "",
        POSTGRESQL: f'\n[store]\nbackend = "postgresql"\nurl = "{postgres_url}"\n',
    }
    sides = []
    for name, store in stores.items():
        slug = name.lower()
        server = StoreBenchServer(
            work / slug, dns.nameserver, sink.port, processes=processes, store=store, selector=slug
        )
        sides.append(open_side(f"{name} tables", slug, server, work, dns))
    return sides


def run_sending(
    args: argparse.Namespace,
    work: Path,
    postgres: PostgresServer,
    database: str,
    profile_base: Path | None,
) -> Sending:
    dns, sink = AuthoritativeDnsServer(), SmtpSink()
    sides: list[Side] = []
    meter = TrafficMeter(postgres, database)
    dns.start()
    try:
        sink.start()
        sides = start_sides(work, dns, sink, args.processes, postgres.url(database))
        stores = dict(zip((side.name for side in sides), (LMDB, POSTGRESQL), strict=True))

        def run(side: Side, way: str, messages: int, label: str) -> Run:
            return one_run(side, way, messages, sink, label, args.deliver_timeout)

        for side in sides:
            for way in args.ways:
                progress(f"warm-up: {args.warmup} messages, {way}, {side.name} ...")
                run(side, way, args.warmup, "warm-up")
        figures = {
            (way, store): Figure(way, store) for way in args.ways for store in (LMDB, POSTGRESQL)
        }
        for number in range(args.rounds):
            label = f"round {number + 1}/{args.rounds}"
            ways = args.ways[number % 2 :] + args.ways[: number % 2]
            for index, way in enumerate(ways):
                turn = (number + index) % 2
                for side in sides[turn:] + sides[:turn]:
                    figure = figures[way, stores[side.name]]
                    on_postgres = figure.store == POSTGRESQL
                    if on_postgres:
                        meter.start()
                    measured = run(side, way, args.messages, label)
                    figure.runs.append(measured)
                    if on_postgres:
                        figure.traffic.append(meter.stop(args.messages))
                    progress(
                        f"{label} {way} {side.name}: {measured.accepted_per_s:,.0f} accepted/s, "
                        f"{measured.delivered_per_s:,.0f} delivered/s, "
                        f"{measured.cpu_ms_per_message:.2f} ms CPU a message"
                    )
        profiles = []
        if profile_base is not None:
            profiles = profile_postgres_side(sides[1], run, args, profile_base)
        return Sending(list(figures.values()), profiles)
    except BaseException:
        for side in sides:
            progress(f"server log ({side.name}, tail):\n" + side.server.log())
        raise
    finally:
        stop_sides(sides, sink, dns)


def profile_postgres_side(
    side: Side,
    run: Callable[[Side, str, int, str], Run],
    args: argparse.Namespace,
    profile_base: Path,
) -> list[Profiled]:
    """An extra run of each way through the server on PostgreSQL under py-spy."""
    profiles = []
    for way in args.ways:
        raw = profile_base.with_name(f"{profile_base.name}-profile-{SLUGS[way]}.txt")
        progress(f"profiling an extra {way} run on {side.name} -> {raw} ...")
        load = partial(run, side, way, args.profile_messages, "profiled run")
        profile.record(side.server.pid, args.profile_seconds, raw, "raw", load)
        collapsed = raw.read_text()
        title = f"the {way} on PostgreSQL (an extra run of {args.profile_messages:,} messages)"
        parts = profile.inclusive_shares(collapsed, PROFILE_PARTS)
        profiles.append(Profiled(title, None, raw.name, profile.hot_spots(collapsed), parts))
    return profiles
