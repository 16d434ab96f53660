"""One run of the insights cost benchmark: a server with insights and counters on or off, one
of the SMTP relay or batch REST benchmarks' own rounds through it, and the wait until it is
quiet again (see `__main__.py`)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.dns_server import AuthoritativeDnsServer

from benchmarks.api.server import verify_domain
from benchmarks.cpu_time import process_tree_cpu
from benchmarks.delivery import rounds as rest
from benchmarks.delivery.rounds import Size
from benchmarks.delivery.sink import SmtpSink, sink_path
from benchmarks.report import progress
from benchmarks.smtp import __main__ as smtp
from benchmarks.smtp.source import source_path
from benchmarks.smtp.tunnel import StunnelClient, stunnel_path

ON, OFF = "insights and counters on", "insights and counters off"
# The ways of sending, and their names in figure names.
SLUGS = {"SMTP relay": "smtp", "REST batch": "batch"}
WAYS = tuple(SLUGS)
BODY_BYTES = 4 * 1024
POST_THREADS = 4
# Quiet: the server's processes used under this share of a core over the window.
QUIET_SHARE, QUIET_WINDOW, QUIET_POLL = 0.10, 0.5, 0.05
QUIET_TIMEOUT = 120.0


class CostBenchServer(smtp.SmtpBenchServer):
    """The SMTP benchmark's server with insights and event counting both on or both off."""

    def __init__(
        self, directory: Path, nameserver: str, sink_port: int, *, processes: int, on: bool
    ) -> None:
        directory.mkdir()
        flag, selector = ("true", "on") if on else ("false", "off")
        super().__init__(
            directory,
            nameserver,
            sink_port,
            processes=processes,
            metrics_extra=f"count_events = {flag}",
            tables=f'[insights]\nenabled = {flag}\n\n[domains]\ndkim_selector = "{selector}"\n',
        )


@dataclass
class Side:
    """One of the two servers, as both benchmarks' rounds need it."""

    name: str
    server: smtp.SmtpBenchServer
    client: httpx.Client  # the REST API, with a full-access key
    token: str
    tunnel: StunnelClient


@dataclass
class Settling:
    """A server of the SMTP benchmark's rounds that, asked to confirm the round's delivery,
    first waits until it is quiet and notes when, and its CPU then."""

    side: Side
    name: str
    tunnel: StunnelClient
    settled_at: float = 0.0
    settled_cpu: float = 0.0

    def cpu_seconds(self) -> float:
        return process_tree_cpu(self.side.server.pid)

    def settle(self) -> None:
        self.settled_at = wait_until_quiet(self.side.server.pid)
        self.settled_cpu = self.cpu_seconds()

    def confirm_delivered(self, subject: str, messages: int, timeout: float) -> None:
        self.settle()
        postwire = smtp.PostwireUnderTest(self.side.server, self.side.client, self.tunnel)
        postwire.confirm_delivered(subject, messages, timeout)


@dataclass(frozen=True)
class Run:
    accepted_per_s: float
    delivered_per_s: float
    settled_per_s: float
    cpu_ms_per_message: float


@dataclass
class Figure:
    way: str
    side: str
    runs: list[Run] = field(default_factory=list)

    def median(self, value: str) -> float:
        return statistics.median(float(getattr(r, value)) for r in self.runs)


def wait_until_quiet(pid: int, timeout: float = QUIET_TIMEOUT) -> float:
    """When the server's processes became quiet: the start of the first window of
    `QUIET_WINDOW` seconds in which they used under `QUIET_SHARE` of a core."""
    readings: list[tuple[float, float]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        readings.append((time.monotonic(), process_tree_cpu(pid)))
        window = [r for r in readings if r[0] >= readings[-1][0] - QUIET_WINDOW]
        (t0, cpu0), (t1, cpu1) = window[0], window[-1]
        if t1 - t0 >= QUIET_WINDOW * 0.9 and (cpu1 - cpu0) / (t1 - t0) < QUIET_SHARE:
            return t0
        time.sleep(QUIET_POLL)
    raise SystemExit(f"the server (pid {pid}) was still busy {timeout:g} s after its run")


def one_run(
    side: Side, way: str, messages: int, sink: SmtpSink, label: str, deliver_timeout: float
) -> Run:
    """One of the benchmarks' own rounds through `side`; settled once the server is quiet
    again (before the API's untimed confirmation that every email was delivered)."""
    size = Size("4 KiB", BODY_BYTES, messages)
    target = Settling(side, side.name, side.tunnel)
    cpu0 = target.cpu_seconds()
    started = time.monotonic()
    if way == "SMTP relay":
        sample = smtp.run_round(
            target, size, sink, subject=f"insights cost, {label}, {side.name}",
            sessions=smtp.SESSIONS, deliver_timeout=deliver_timeout,
        )  # fmt: skip
        accepted_per_s, delivered_per_s = sample.accepted_per_s, sample.delivered_per_s
    else:
        rest_sample, ids = rest.run_round(
            size, side.server.base_url, side.token, sink, side.server.pid,
            post_threads=POST_THREADS, deliver_timeout=deliver_timeout,
            label=f"{label}, {side.name}",
        )  # fmt: skip
        target.settle()
        rest.confirm_delivered(side.client, ids, rest.CONFIRM_TIMEOUT)
        accepted_per_s, delivered_per_s = rest_sample.accepted_per_s, rest_sample.delivered_per_s
    return Run(
        accepted_per_s,
        delivered_per_s,
        messages / (target.settled_at - started),
        1000 * (target.settled_cpu - cpu0) / messages,
    )


def start_side(
    work: Path, dns: AuthoritativeDnsServer, sink: SmtpSink, processes: int, *, on: bool
) -> Side:
    name, slug = (ON, "on") if on else (OFF, "off")
    server = CostBenchServer(work / slug, dns.nameserver, sink.port, processes=processes, on=on)
    return open_side(name, slug, server, work, dns)


def open_side(
    name: str, slug: str, server: smtp.SmtpBenchServer, work: Path, dns: AuthoritativeDnsServer
) -> Side:
    """Start `server`, verify the sending domain on it, open its stunnel client (named
    `slug`): a side both benchmarks' rounds can run through."""
    progress(f"starting postwire serve ({name}) ...")
    server.start()
    tls_port = int(server.wait_for_log(smtp.TLS_LISTENING)[1])
    token = server.create_key("bench")
    client = httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    verify_domain(client, dns, smtp.DOMAIN)
    tunnel = StunnelClient(work, slug, tls_port)
    tunnel.start()
    return Side(name, server, client, token, tunnel)


def stop_sides(sides: list[Side], sink: SmtpSink, dns: AuthoritativeDnsServer) -> None:
    """Stop every side's client, tunnel and server, then the sink and the DNS server."""
    for side in sides:
        side.client.close()
        side.tunnel.stop()
        side.server.stop()
    sink.stop()
    dns.stop()


def check_ways_and_peers(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    *,
    make_target: str,
    peers: Sequence[tuple[str, object]] = (),
) -> None:
    """Turn `args.ways` (slugs, comma-separated) into the ways' names, and exit with a usage
    error if they name none or an unknown one, or if smtp-sink, smtp-source, stunnel or one of
    `peers` (name, its path or None) is not installed."""
    by_slug = {slug: way for way, slug in SLUGS.items()}
    chosen = [slug.strip() for slug in args.ways.split(",") if slug.strip()]
    if not chosen or any(slug not in by_slug for slug in chosen):
        parser.error(f"--ways takes {' and/or '.join(by_slug)}, comma-separated")
    args.ways = tuple(by_slug[slug] for slug in chosen)
    needed = [
        ("smtp-sink", sink_path()),
        ("smtp-source", source_path()),
        ("stunnel", stunnel_path()),
        *peers,
    ]
    missing = [name for name, path in needed if path is None]
    if missing:
        parser.error(f"{' and '.join(missing)} not installed (`make {make_target}` installs them)")
