"""One run of the import benchmark: the server, its properties and segment, the CSV, the timed
import with the server's memory and CPU beside it, and the profiled extra import.
`__main__.py` says what each step measures and renders the report."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.api import profile
from benchmarks.api.profile import Profiled
from benchmarks.api.server import BenchServer
from benchmarks.broadcasts.memory import MemoryPeaks, MemorySampler
from benchmarks.broadcasts.threads import cpu_between, thread_cpu
from benchmarks.cpu_time import machine_busy, process_tree_cpu
from benchmarks.delivery.rounds import ok
from benchmarks.report import progress

POLL_SECONDS = 0.25
# A refused row every this many: the import reports it and goes on.
BAD_EVERY = 1000
# Spool bytes a contact, its address index, segment membership and webhook event may take.
SPOOL_BYTES_A_CONTACT = 8 * 1024
MIN_MAP_SIZE = 8 * 1024**3
# Nothing here resolves names; the config needs a nameserver all the same.
UNUSED_NAMESERVER = "127.0.0.1:9"
# Parts of the profile named in the report (a sample may count for several).
PROFILE_PARTS = {
    "the import job (`audiences/imports.py`)": ("(postwire/audiences/imports.py)",),
    "CSV rows read and checked (`audiences/csv_rows.py`)": ("(postwire/audiences/csv_rows.py)",),
    "address checks (`compose/addresses.py`)": ("(postwire/compose/addresses.py)",),
    "contact writes (`store/contacts.py`, `segments.py`)": (
        "put_contact (postwire/store/contacts.py)",
        "(postwire/store/segments.py)",
    ),
    "contact webhook events (`add_event`, `contact_webhook_data`)": (
        "add_event (postwire/store/deliveries.py)",
        "contact_webhook_data (",
    ),
    "records encoded and decoded (`Table.encode`, `Table.decode`)": (
        "Table.encode (",
        "Table.decode (",
    ),
    "the webhook dispatcher, fanning the events out (`webhooks/`)": ("(postwire/webhooks/",),
    "REST API (Hypercorn, Quart: the polling)": ("(hypercorn/", "(quart/", "(quart_trio/"),
}


@dataclass
class Measured:
    rows: int
    file_bytes: int
    upload_seconds: float  # the POST, file included, to its 201
    seconds: float  # from the 201 to the first GET reading `completed`
    final: dict[str, Any]
    progress: list[tuple[float, int]]  # (seconds since the 201, rows counted)
    memory: MemoryPeaks
    server_cpu: float  # cores busy on average during the import
    other_cpu: float
    threads: dict[str, float]  # CPU seconds by thread name during the import
    profiles: list[Profiled] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        return self.rows / self.seconds


class ImportBenchServer(BenchServer):
    """The API benchmark's server, its spool map large enough for `contacts`."""

    def __init__(self, directory: Path, *, contacts: int, processes: int) -> None:
        map_size = max(MIN_MAP_SIZE, contacts * SPOOL_BYTES_A_CONTACT)
        super().__init__(directory, UNUSED_NAMESERVER, processes=processes, spool_map_size=map_size)


def write_csv(path: Path, rows: int, first: int = 0) -> int:
    """N rows of contacts, about 40 bytes each (a million fit the 50 MB cap): an address, two
    names, a `plan` and a `seats` property; every BAD_EVERY-th row with an address that is not
    one. Its size in bytes."""
    plans = ("free", "pro", "team")
    with path.open("w") as out:
        out.write("email,first_name,last_name,plan,seats\n")
        for n in range(first, first + rows):
            address = f"c{n:07d}@example.org" if n % BAD_EVERY != BAD_EVERY - 1 else f"bad{n}"
            out.write(f"{address},F{n % 9973},L{n % 8191},{plans[n % 3]},{n % 250}\n")
    return path.stat().st_size


def upload(client: httpx.Client, path: Path, segment_id: str) -> str:
    """POST /contacts/imports, the file streamed from disk; the import's id."""
    with path.open("rb") as csv:
        created = client.post(
            "/contacts/imports",
            files={"file": (path.name, csv, "text/csv")},
            data={"on_conflict": "upsert", "segments": f'[{{"id": "{segment_id}"}}]'},
        )
    return str(ok(created)["id"])


def wait_for_import(
    client: httpx.Client, import_id: str, timeout: float
) -> tuple[float, dict[str, Any], list[tuple[float, int]]]:
    """Poll the import until it completes: its seconds, last state and progress."""
    started = time.monotonic()
    steps: list[tuple[float, int]] = []
    while True:
        state = ok(client.get(f"/contacts/imports/{import_id}"))
        now = time.monotonic()
        steps.append((now - started, int(state["counts"]["total"])))
        if state["status"] == "completed":
            return now - started, state, steps
        if state["status"] == "failed" or now - started > timeout:
            raise SystemExit(f"import {import_id} did not complete: {state}")
        if len(steps) % 40 == 1:
            progress(f"{steps[-1][1]:,} rows after {now - started:.0f} s")
        time.sleep(POLL_SECONDS)


def run_benchmark(args: argparse.Namespace, work: Path, profile_base: Path | None) -> Measured:
    server = ImportBenchServer(work, contacts=args.contacts, processes=args.processes)
    csv = work / "contacts.csv"
    file_bytes = write_csv(csv, args.contacts)
    progress(f"wrote {args.contacts:,} rows, {file_bytes / 1e6:.1f} MB; starting postwire ...")
    try:
        server.start()
        headers = {"Authorization": f"Bearer {server.create_key('bench')}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=600) as client:
            ok(client.post("/contact-properties", json={"key": "plan", "type": "string"}))
            ok(client.post("/contact-properties", json={"key": "seats", "type": "number"}))
            segment = ok(client.post("/segments", json={"name": "Imported"}))["id"]
            memory = MemorySampler(server.pid)
            memory.start()
            progress("uploading ...")
            started = time.monotonic()
            import_id = upload(client, csv, segment)
            upload_seconds = time.monotonic() - started
            cpu_before, busy_before, threads_before = (
                process_tree_cpu(server.pid),
                machine_busy(),
                thread_cpu(server.pid),
            )
            progress(f"uploaded in {upload_seconds:.1f} s; importing ...")
            seconds, final, steps = wait_for_import(client, import_id, args.import_timeout)
            server_cpu = process_tree_cpu(server.pid) - cpu_before
            other_cpu = machine_busy() - busy_before - server_cpu
            threads = cpu_between(threads_before, thread_cpu(server.pid))
            peaks = memory.stop()
            progress(
                f"imported in {seconds:.1f} s: {args.contacts / seconds:,.0f} contacts/s; "
                f"VmHWM {peaks.vm_hwm:,.0f} MiB, peak RssAnon {peaks.rss_anon:,.0f} MiB"
            )
            profiles = []
            if profile_base is not None:
                profiles.append(profiled_round(args, server, client, segment, work, profile_base))
        return Measured(
            rows=args.contacts,
            file_bytes=file_bytes,
            upload_seconds=upload_seconds,
            seconds=seconds,
            final=final,
            progress=steps,
            memory=peaks,
            server_cpu=server_cpu / seconds,
            other_cpu=other_cpu / seconds,
            threads=threads,
            profiles=profiles,
        )
    except BaseException:
        progress("server log (tail):\n" + server.log())
        raise
    finally:
        server.stop()


def profiled_round(
    args: argparse.Namespace,
    server: BenchServer,
    client: httpx.Client,
    segment_id: str,
    work: Path,
    profile_base: Path,
) -> Profiled:
    """A second import, of new addresses, under py-spy."""
    raw = profile_base.with_name(f"{profile_base.name}-profile.txt")
    csv = work / "profiled.csv"
    write_csv(csv, args.profile_contacts, first=args.contacts)
    progress(f"profiling an import of {args.profile_contacts:,} rows with py-spy -> {raw}")

    def load() -> None:
        deadline = time.monotonic() + args.profile_seconds + profile.ATTACH_SECONDS
        wait_for_import(client, upload(client, csv, segment_id), args.import_timeout)
        time.sleep(max(0.0, deadline - time.monotonic()))

    profile.record(server.pid, args.profile_seconds, raw, "raw", load)
    collapsed = raw.read_text()
    return Profiled(
        f"an import of {args.profile_contacts:,} rows (an extra round)",
        None,
        raw.name,
        profile.hot_spots(collapsed),
        profile.inclusive_shares(collapsed, PROFILE_PARTS),
    )
