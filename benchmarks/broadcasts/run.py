"""One run of the broadcast benchmark: the server and its seeded audience, the idle latency,
the broadcast timed with transactional sends beside it, the profiled round and the signing
ceiling. `__main__.py` says what each step measures and renders the report."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tests.dns_server import AuthoritativeDnsServer

from benchmarks.api import profile
from benchmarks.api.profile import Profiled
from benchmarks.api.server import BenchServer, verify_domain
from benchmarks.broadcasts.blackhole import SilentListener
from benchmarks.broadcasts.content import broadcast_body, mailed, transactional_email
from benchmarks.broadcasts.disk import DiskReading, disk_reading, process_write_bytes
from benchmarks.broadcasts.latency import Latencies, SteadySends
from benchmarks.broadcasts.memory import MemoryPeaks, MemorySampler
from benchmarks.broadcasts.signing import SigningCeiling, measure_signing
from benchmarks.broadcasts.threads import ThreadStates, cpu_between, thread_cpu
from benchmarks.cpu_time import machine_busy, process_tree_cpu
from benchmarks.delivery.rounds import DOMAIN, DeliveryBenchServer, ok
from benchmarks.delivery.sink import SmtpSink
from benchmarks.report import progress

POLL_SECONDS = 0.25
WARMUP_SENDS = 20
# A broadcast whose count stands still this long has failed (the server's log says why).
STALL_SECONDS = 120.0
# Spool bytes a contact's message and records may take, for the map's size (a sparse file).
SPOOL_BYTES_A_CONTACT = 24 * 1024
MIN_MAP_SIZE = 8 * 1024**3
SEED_TIMEOUT = 3600.0
# Parts of the profile named in the report (a sample may count for several).
PROFILE_PARTS = {
    "the broadcast engine (`postwire/broadcasts/`)": ("(postwire/broadcasts/",),
    "placeholders (`postwire/templates/`)": ("(postwire/templates/",),
    "unsubscribe links (`postwire/unsubscribe/`)": ("(postwire/unsubscribe/",),
    "accept path (`postwire/accept.py`: build, hand to signing)": ("(postwire/accept.py)",),
    "MIME build (`compose/`, `_core.build_message`)": ("(postwire/compose/",),
    "audience store reads (`store/contacts.py`, `segments.py`, `topics.py`)": (
        "(postwire/store/contacts.py)",
        "(postwire/store/segments.py)",
        "(postwire/store/topics.py)",
        "(postwire/store/contact_properties.py)",
    ),
    "records encoded (`Table.encode`, `Table.decode`)": ("Table.encode (", "Table.decode ("),
    "REST API (Hypercorn, Quart: the probe's sends, the polling)": (
        "(hypercorn/",
        "(quart/",
        "(quart_trio/",
    ),
    "signing hand-off (`postwire/signing.py`; RSA itself runs without the GIL)": (
        "(postwire/signing.py)",
    ),
    "handing work to threads (`trio.to_thread.run_sync`)": ("to_thread_run_sync (trio/",),
    "the delivery engine, holding what it leased (`postwire/delivery/`)": ("(postwire/delivery/",),
}


@dataclass
class Measured:
    contacts: int
    seed_seconds: float
    mailed: int  # messages the broadcast must enqueue
    seconds: float  # from the send call to status "sent"
    final: dict[str, Any]  # GET /broadcasts/{id} once sent
    progress: list[tuple[float, int]]  # (seconds since send, messages counted), when counted
    idle: Latencies
    during: Latencies
    memory: MemoryPeaks
    server_cpu: float  # cores busy on average during the broadcast
    other_cpu: float
    threads: dict[str, float]  # CPU seconds by thread name during the broadcast
    thread_states: dict[str, dict[str, float]]  # by thread name: share of samples per state
    disk: DiskReading | None  # the spool's disk during the broadcast
    written: int  # bytes the server wrote (dirtied) during the broadcast
    signing: SigningCeiling
    profiles: list[Profiled] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        return self.mailed / self.seconds


class BroadcastBenchServer(DeliveryBenchServer):
    """The delivery benchmark's server (mail for the contacts' domain routed to `route_port`),
    its spool map large enough for `contacts` messages, with the `[broadcasts]` keys given
    (`rate`, `page_size`; the server's defaults otherwise)."""

    def __init__(
        self,
        directory: Path,
        nameserver: str,
        route_port: int,
        *,
        contacts: int,
        processes: int,
        broadcasts: dict[str, int],
    ) -> None:
        keys = "".join(f"{key} = {value}\n" for key, value in broadcasts.items())
        super().__init__(
            directory,
            nameserver,
            route_port,
            processes=processes,
            spool_map_size=max(MIN_MAP_SIZE, contacts * SPOOL_BYTES_A_CONTACT),
            tables=f"[broadcasts]\n{keys}" if broadcasts else "",
        )


def seed(server: BenchServer, token: str, args: argparse.Namespace) -> tuple[list[str], float]:
    """Write the audience with the server stopped: the segments' ids and the seconds it took."""
    command = [sys.executable, "-m", "benchmarks.broadcasts.seed", "--config"]
    command += [str(server.config_path), "--token", token, "--contacts", str(args.contacts)]
    if args.profile:
        command += ["--second-contacts", str(min(args.profile_contacts, args.contacts))]
    result = subprocess.run(
        command, stdout=subprocess.PIPE, text=True, timeout=SEED_TIMEOUT, check=True
    )
    seeded = json.loads(result.stdout.strip().splitlines()[-1])
    return seeded["segments"], seeded["seconds"]


def counted(broadcast: dict[str, Any]) -> int | None:
    """The messages a broadcast reports enqueued so far, when it reports counts."""
    counts = broadcast.get("counts")
    if not isinstance(counts, dict):
        return None
    value = counts.get("queued", counts.get("sent"))
    return value if isinstance(value, int) else None


def send_broadcast(
    client: httpx.Client, segment_id: str, name: str, timeout: float
) -> tuple[float, dict[str, Any], list[tuple[float, int]]]:
    """Create and send a broadcast, wait for "sent": its seconds, last state and progress."""
    broadcast_id = ok(client.post("/broadcasts", json=broadcast_body(segment_id, name)))["id"]
    started = time.monotonic()
    ok(client.post(f"/broadcasts/{broadcast_id}/send", json={}))
    steps: list[tuple[float, int]] = []
    moved_at = started  # when the count last changed
    while True:
        state = ok(client.get(f"/broadcasts/{broadcast_id}"))
        now = time.monotonic()
        count = counted(state)
        if count is not None:
            steps.append((now - started, count))
        if state["status"] == "sent":
            return now - started, state, steps
        if state["status"] not in ("queued", "sending"):
            raise SystemExit(f"broadcast {broadcast_id} is {state['status']}: {state}")
        if now - started > timeout:
            raise SystemExit(f"broadcast {broadcast_id} not sent within {timeout:g} s: {state}")
        if len(steps) < 2 or steps[-1][1] != steps[-2][1]:
            moved_at = now
        if now - moved_at > STALL_SECONDS:
            raise SystemExit(
                f"broadcast {broadcast_id} enqueued nothing for {STALL_SECONDS:g} s: {state}"
            )
        if len(steps) % 40 == 1 and count is not None:
            progress(f"{name}: {count:,} messages after {now - started:.0f} s")
        time.sleep(POLL_SECONDS)


def steady_latencies(server: BenchServer, token: str, rate: float, seconds: float) -> Latencies:
    sends = SteadySends(server.base_url, token, rate, transactional_email)
    sends.start()
    time.sleep(seconds)
    measured = sends.stop()
    if measured.errors:
        raise SystemExit(f"{measured.errors} probe sends failed: {sends.first_error}")
    return measured


def run_benchmark(args: argparse.Namespace, work: Path, profile_base: Path | None) -> Measured:
    dns = AuthoritativeDnsServer()
    route: SmtpSink | SilentListener = SmtpSink() if args.deliver else SilentListener()
    server: BroadcastBenchServer | None = None
    dns.start()
    try:
        route.start()
        server = BroadcastBenchServer(
            work,
            dns.nameserver,
            route.port,
            contacts=args.contacts,
            processes=args.processes,
            broadcasts={
                key: value
                for key, value in (("rate", args.broadcast_rate), ("page_size", args.page_size))
                if value is not None
            },
        )
        progress("starting postwire serve ...")
        server.start()
        token = server.create_key("bench")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:
            progress(f"verifying {DOMAIN} against Knot DNS at {dns.nameserver} ...")
            verify_domain(client, dns, DOMAIN)
        server.stop()
        progress(f"seeding {args.contacts:,} contacts with the server stopped ...")
        segments, seed_seconds = seed(server, token, args)
        progress(f"seeded in {seed_seconds:.1f} s; starting postwire serve again ...")
        server.start()
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:
            for number in range(WARMUP_SENDS):
                ok(client.post("/emails", json=transactional_email(-1 - number)))
            progress(f"idle: POST /emails at {args.rate:g}/s for {args.idle_seconds:g} s ...")
            idle = steady_latencies(server, token, args.rate, args.idle_seconds)
            progress(f"idle p50 {idle.p50_ms:.1f} ms, p99 {idle.p99_ms:.1f} ms")

            memory = MemorySampler(server.pid)
            memory.start()
            states = ThreadStates(server.pid)
            states.start()
            disk_before, written_before = disk_reading(work), process_write_bytes(server.pid)
            sends = SteadySends(server.base_url, token, args.rate, transactional_email)
            cpu_before, busy_before, threads_before = (
                process_tree_cpu(server.pid),
                machine_busy(),
                thread_cpu(server.pid),
            )
            sends.start()
            progress(f"broadcast to {args.contacts:,} contacts ...")
            seconds, final, steps = send_broadcast(
                client, segments[0], "Benchmark", args.broadcast_timeout
            )
            during = sends.stop()
            server_cpu = process_tree_cpu(server.pid) - cpu_before
            other_cpu = machine_busy() - busy_before - server_cpu
            threads = cpu_between(threads_before, thread_cpu(server.pid))
            peaks = memory.stop()
            thread_states = states.stop()
            disk_after, written = disk_reading(work), process_write_bytes(server.pid)
            written -= written_before
            disk = None
            if disk_before is not None and disk_after is not None:
                disk = disk_after.since(disk_before)
            if during.errors:
                raise SystemExit(f"{during.errors} probe sends failed: {sends.first_error}")
            expected = mailed(args.contacts)
            count = counted(final)
            if count is not None and count != expected:
                raise SystemExit(f"the broadcast counts {count:,} messages, not {expected:,}")
            progress(
                f"broadcast sent in {seconds:.1f} s: {expected / seconds:,.0f} messages/s; "
                f"POST /emails p99 {during.p99_ms:.1f} ms (idle {idle.p99_ms:.1f} ms); "
                f"peak RssAnon {peaks.rss_anon:,.0f} MiB, VmHWM {peaks.vm_hwm:,.0f} MiB"
            )

            profiles: list[Profiled] = []
            if profile_base is not None:
                profiles.append(profiled_round(args, server, client, segments[1], profile_base))
        server.stop()
        progress(f"signing ceiling: {args.signing_seconds:g} s a figure ...")
        signing = measure_signing(args.signing_seconds)
        return Measured(
            contacts=args.contacts,
            seed_seconds=seed_seconds,
            mailed=expected,
            seconds=seconds,
            final=final,
            progress=steps,
            idle=idle,
            during=during,
            memory=peaks,
            server_cpu=server_cpu / seconds,
            other_cpu=other_cpu / seconds,
            threads=threads,
            thread_states=thread_states,
            disk=disk,
            written=written,
            signing=signing,
            profiles=profiles,
        )
    except BaseException:
        if server is not None:
            progress("server log (tail):\n" + server.log())
        raise
    finally:
        if server is not None:
            server.stop()
        route.stop()
        dns.stop()


def profiled_round(
    args: argparse.Namespace,
    server: BenchServer,
    client: httpx.Client,
    segment_id: str,
    profile_base: Path,
) -> Profiled:
    """A second broadcast, to the profiled segment, under py-spy."""
    raw = profile_base.with_name(f"{profile_base.name}-profile.txt")
    contacts = min(args.profile_contacts, args.contacts)
    progress(f"profiling a broadcast to {contacts:,} contacts with py-spy -> {raw}")
    outcome: list[float] = []

    def load() -> None:
        deadline = time.monotonic() + args.profile_seconds + profile.ATTACH_SECONDS
        outcome.append(send_broadcast(client, segment_id, "Profiled", args.broadcast_timeout)[0])
        time.sleep(max(0.0, deadline - time.monotonic()))

    profile.record(server.pid, args.profile_seconds, raw, "raw", load)
    collapsed = raw.read_text()
    progress(f"profiled broadcast sent in {outcome[0]:.1f} s")
    return Profiled(
        f"a broadcast to {contacts:,} contacts (an extra round)",
        None,
        raw.name,
        profile.hot_spots(collapsed),
        profile.inclusive_shares(collapsed, PROFILE_PARTS),
    )
