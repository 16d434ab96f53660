"""`python -m benchmarks.operator_cli`: how long the operator's read commands take on a store
of a million emails.

1. A store is filled through `store/` (no server running): `--emails` email records with their
   index entries (`store/email_samples.py`, 90 days), of which `--queued` (default 10%) are
   also spooled with a delivery record; of those, half have failed once and wait to retry for
   one of ten recipient domains (retry rows and counts as the delivery engine writes them).
2. Each read command runs as an operator runs it, `postwire ... --config FILE` in a new
   process, `--rounds` times; the median and worst wall times are reported (Python's start and
   imports included). The goal: every command answers within one second.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import trio

from postwire._core import WriteBatch
from postwire.config import Config, load_config
from postwire.metrics.operator_registry import RETRY_BACKLOG_KEY, retry_destination_key
from postwire.store import accounts
from postwire.store.deliveries import DELIVERIES, DeliveryRecord
from postwire.store.email_samples import SampleSender, sample_emails
from postwire.store.emails import put_new_email
from postwire.store.retry_waiting import mark_waiting
from postwire.store.spool import serve_spool

DESTINATIONS = tuple(f"retry-{n}.example" for n in range(10))
SPAN_DAYS = 90
BATCH = 5_000
BODY = b"From: a@b.example\r\nTo: c@d.example\r\nSubject: queued\r\n\r\nHello.\r\n"


async def fill(config: Config, emails: int, queued_share: float) -> tuple[str, int]:
    """Seed the store; return a deferred message's id and how many messages were spooled."""
    rng = random.Random(7)
    now_ms = int(time.time() * 1000)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        team = await accounts.create_team(spool, "Bench", datetime.now(UTC))
        for n in range(5):
            await accounts.create_api_key(
                spool, team.id, f"key {n}", "full_access", None, datetime.now(UTC)
            )
        sender = SampleSender("bench-domain", "bench-example.test", ())
        records = sample_emails(
            team.id, [sender], emails, start_ms=now_ms - SPAN_DAYS * 86_400_000, end_ms=now_ms
        )
        batch, in_batch, spooled, deferred_id = WriteBatch(), 0, 0, ""
        started = time.monotonic()
        for written, record in enumerate(records, 1):
            put_new_email(batch, record)
            if rng.random() < queued_share:
                spooled += 1
                enqueued_ms = int(record.id[:8] + record.id[9:13], 16)
                deferred = spooled % 2 == 0
                domain = DESTINATIONS[spooled % len(DESTINATIONS)]
                recipient = f"someone@{domain}"
                due_ms = now_ms + 3_600_000 if deferred else now_ms + 86_400_000
                batch.enqueue(record.id, BODY, due_ms, enqueued_ms)
                delivery = DeliveryRecord(
                    team.id, record.envelope_from, [recipient], "opportunistic",
                    attempts=1 if deferred else 0,
                )  # fmt: skip
                DELIVERIES.put(batch, record.id, delivery)
                if deferred:
                    batch.add_counter("counters", RETRY_BACKLOG_KEY, 1)
                    batch.add_counter("counters", retry_destination_key(domain), 1)
                    mark_waiting(batch, domain, enqueued_ms, record.id, waiting=True)
                    deferred_id = deferred_id or record.id
            in_batch += 1
            if in_batch == BATCH:
                await spool.commit(batch)
                batch, in_batch = WriteBatch(), 0
            if written % 100_000 == 0:
                rate = written / (time.monotonic() - started)
                print(f"  {written} emails written ({rate:.0f}/s)", file=sys.stderr)
        await spool.commit(batch)
        nursery.cancel_scope.cancel()
    return deferred_id, spooled


def commands(deferred_id: str) -> list[list[str]]:
    return [
        ["status"],
        ["queue", "list", "--limit", "50"],
        ["queue", "list", "--domain", DESTINATIONS[1], "--limit", "50"],
        ["queue", "list", "--older-than", "30d", "--limit", "50"],
        ["queue", "show", deferred_id],
        ["keys", "list"],
        ["users", "list"],
        ["domains", "list"],
        ["config", "check"],
    ]


def timed(run: Callable[[], object], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emails", type=int, default=1_000_000)
    parser.add_argument("--queued", type=float, default=0.10, help="share of emails spooled")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="keep the store here (default: a temp dir)")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="postwire-operator-bench-"))
    config_file = directory / "postwire.toml"
    map_size = max(8 * 1024**3, args.emails * 8 * 1024)
    config_file.write_text(
        f'data_dir = "{directory / "data"}"\n[spool]\nmap_size = {map_size}\n'
        '[smtp]\nstarttls_listen = []\ntls_listen = []\n[delivery]\nhelo_name = "bench.test"\n'
    )
    config = load_config(config_file)
    started = time.monotonic()
    deferred_id, spooled = trio.run(fill, config, args.emails, args.queued)
    fill_seconds = time.monotonic() - started
    print(f"filled: {args.emails} emails, {spooled} spooled, in {fill_seconds:.0f} s")
    print(f"{'command':<58} {'median':>8} {'worst':>8}")
    for command in commands(deferred_id):
        argv = [sys.executable, "-m", "postwire", *command, "--config", str(config_file)]

        def run(argv: list[str] = argv) -> None:
            subprocess.run(argv, check=True, capture_output=True)

        times = timed(run, args.rounds)
        name = "postwire " + " ".join(command)
        print(f"{name:<58} {statistics.median(times):>7.3f}s {max(times):>7.3f}s")


if __name__ == "__main__":
    main()
