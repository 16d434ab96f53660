"""One round of the delivery benchmark, and what it needs: the server routed to the sink, the
emails, the end-to-end check and the API's confirmation. Other benchmarks that deliver mail as
part of what they measure (webhooks) run the same rounds."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.api.server import BenchServer
from benchmarks.cpu_time import machine_busy, process_cpu, process_tree_cpu
from benchmarks.delivery.sink import SmtpSink
from benchmarks.report import progress

DOMAIN = "bench-example.test"
RECIPIENT_DOMAIN = "example.org"
BATCH_SIZE = 100
MAX_CONNECTIONS = 50
# The `[delivery]` keys of a server that delivers to the sink.
SINK_DELIVERY = f'helo_name = "bench.localhost"\nmax_connections_per_site = {MAX_CONNECTIONS}\n'
CHECK_TIMEOUT = 30.0
CONFIRM_TIMEOUT = 60.0


@dataclass(frozen=True)
class Size:
    name: str
    body_bytes: int
    messages: int


@dataclass(frozen=True)
class Sample:
    accepted_per_s: float
    delivered_per_s: float
    accept_seconds: float
    deliver_seconds: float  # first accept to last message at smtp-sink
    end_to_end_seconds: float  # first call sent to last message at smtp-sink
    p50_ms: float  # a call's time from sent to replied (a batch call's, for batches)
    p99_ms: float
    peak_connections: int  # established connections to smtp-sink, sampled every 50 ms
    server_cpu: float  # cores busy on average from the first call to the last delivery
    sink_cpu: float
    client_cpu: float  # this process: the threads posting the batches, the counters' readers
    other_cpu: float  # everything else on the machine


class DeliveryBenchServer(BenchServer):
    """The API benchmark's server, with example.org routed to the sink over 50 connections."""

    def __init__(
        self, directory: Path, nameserver: str, sink_port: int, *, processes: int = 1, **config: Any
    ) -> None:
        super().__init__(
            directory,
            nameserver,
            processes=processes,
            routes={RECIPIENT_DOMAIN: f"127.0.0.1:{sink_port}"},
            delivery_extra=SINK_DELIVERY,
            **config,
        )


def body_text(size: int) -> str:
    """Plain ASCII text of exactly `size` bytes in 76-character lines (7bit, no re-encoding)."""
    line = "The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs.\n"
    line = line[:75] + "\n"
    text = line * (size // len(line) + 1)
    return text[: size - 1] + "\n"


def email(n: int, text: str) -> dict[str, Any]:
    return {
        "from": f"Acme <news@{DOMAIN}>",
        "to": [f"u{n}@{RECIPIENT_DOMAIN}"],
        "subject": f"Delivery benchmark message {n}",
        "text": text,
    }


def ok(response: httpx.Response) -> Any:
    if not response.is_success:
        raise SystemExit(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {response.text[:500]}"
        )
    return response.json()


def confirm_delivered(client: httpx.Client, ids: set[str], timeout: float) -> None:
    """Page through the newest emails until every one of `ids` reads "delivered" (bounded)."""
    deadline = time.monotonic() + timeout
    pending = set(ids)
    while True:
        seen: dict[str, str] = {}
        after: str | None = None
        while len(seen) < len(ids):  # the round's emails are the newest ones
            params: dict[str, str | int] = {"limit": 100}
            if after is not None:
                params["after"] = after
            page = ok(client.get("/emails", params=params))
            for item in page["data"]:
                if item["id"] in pending:
                    seen[item["id"]] = item["last_event"]
            if not page["data"] or not page.get("has_more"):
                break
            after = page["data"][-1]["id"]
        pending = {i for i in pending if seen.get(i) != "delivered"}
        if not pending:
            return
        if time.monotonic() > deadline:
            states: dict[str, int] = {}
            for i in pending:
                states[seen.get(i, "not listed")] = states.get(seen.get(i, "not listed"), 0) + 1
            raise SystemExit(
                f"{len(pending)} of {len(ids)} emails not delivered per the API after "
                f"{timeout:g} s: {states}"
            )
        time.sleep(0.5)


def percentile(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of ascending `ordered` values: the smallest value with at
    least `share` of them at or below it (a round of few calls has no finer point)."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def check_end_to_end(client: httpx.Client, sink: SmtpSink) -> None:
    """One email must be accepted, reach smtp-sink and read "delivered" before anything is timed."""
    before = sink.messages
    sent = ok(client.post("/emails", json=email(0, body_text(4096))))
    if sink.wait_for(before + 1, CHECK_TIMEOUT) is None:
        raise SystemExit(f"the check email did not reach smtp-sink within {CHECK_TIMEOUT:g} s")
    confirm_delivered(client, {sent["id"]}, CHECK_TIMEOUT)


def run_round(
    size: Size,
    base_url: str,
    token: str,
    sink: SmtpSink,
    server_pid: int,
    *,
    post_threads: int,
    deliver_timeout: float,
    label: str,
    batch_size: int = BATCH_SIZE,
) -> tuple[Sample, set[str]]:
    """Post `size.messages` emails, `batch_size` a call (1: single sends to `POST /emails`),
    and wait until smtp-sink has them all."""
    text = body_text(size.body_bytes)
    if batch_size == 1:
        path, bodies = "/emails", [json.dumps(email(n, text)) for n in range(size.messages)]
    else:
        path = "/emails/batch"
        bodies = [
            json.dumps(
                [email(n, text) for n in range(start, min(start + batch_size, size.messages))]
            )
            for start in range(0, size.messages, batch_size)
        ]
    local = threading.local()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(body: str) -> tuple[float, float, list[str]]:
        """When the reply came, how long the call took, and the ids it returned."""
        client: httpx.Client | None = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(base_url=base_url, headers=headers, timeout=120)
        sent = time.monotonic()
        response = client.post(path, content=body)
        accepted = time.monotonic()
        reply = ok(response)
        ids = [reply["id"]] if batch_size == 1 else [d["id"] for d in reply["data"]]
        return accepted, accepted - sent, ids

    base = sink.messages
    peak = 0
    sampling = threading.Event()

    def sample_connections() -> None:
        nonlocal peak
        while not sampling.wait(0.05):
            peak = max(peak, sink.connections())

    sampler = threading.Thread(target=sample_connections, daemon=True)
    sampler.start()
    client_cpu0 = process_cpu(os.getpid())
    server_cpu0, sink_cpu0, machine0 = (
        process_tree_cpu(server_pid),
        process_cpu(sink.pid),
        machine_busy(),
    )
    started = time.monotonic()
    with ThreadPoolExecutor(post_threads) as pool:
        results = list(pool.map(post, bodies))
    last_accept = time.monotonic()
    first_accept = min(accepted for accepted, _, _ in results)
    ids = {i for _, _, batch in results for i in batch}
    latencies = sorted(took for _, took, _ in results)
    if len(ids) != size.messages:
        raise SystemExit(f"{len(ids)} ids for {size.messages} emails posted")
    accept_seconds = last_accept - started
    progress(
        f"{label}: accepted {size.messages} in {accept_seconds:.2f} s "
        f"({size.messages / accept_seconds:,.0f}/s); {sink.messages - base} delivered so far"
    )

    done = sink.wait_for_all(
        base + size.messages,
        timeout=deliver_timeout,
        label=label,
        base=base,
        since=first_accept,
        started=started,
    )
    wall = time.monotonic() - started
    sampling.set()
    sampler.join(timeout=5)
    server_cpu = (process_tree_cpu(server_pid) - server_cpu0) / wall
    sink_cpu = (process_cpu(sink.pid) - sink_cpu0) / wall
    machine = (machine_busy() - machine0) / wall
    client_cpu = (process_cpu(os.getpid()) - client_cpu0) / wall
    deliver_seconds = done - first_accept
    sample = Sample(
        accepted_per_s=size.messages / accept_seconds,
        delivered_per_s=size.messages / deliver_seconds,
        accept_seconds=accept_seconds,
        deliver_seconds=deliver_seconds,
        end_to_end_seconds=done - started,
        p50_ms=1000 * percentile(latencies, 0.50),
        p99_ms=1000 * percentile(latencies, 0.99),
        peak_connections=peak,
        server_cpu=server_cpu,
        sink_cpu=sink_cpu,
        client_cpu=client_cpu,
        other_cpu=max(0.0, machine - server_cpu - sink_cpu - client_cpu),
    )
    return sample, ids
