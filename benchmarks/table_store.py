"""The table store on LMDB against PostgreSQL, side by side in one run (`make bench-table-store`).

- commits/s of small batches (three operations: a ~300-byte record, a ~300-byte index entry
  inserted if absent, a counter) from many concurrent Trio tasks, each waiting for its commit;
- get and prefix-scan latency (p50/p99) of one caller at a time, and gets/s from many callers;
- on PostgreSQL, transactions per batch (from `pg_stat_database`), so round trips per batch:
  a group commit is two round trips (BEGIN and every statement pipelined, then COMMIT).

PostgreSQL is Debian's 15 on loopback with fsync on, as LMDB's commits are fsync'd. Reads on
PostgreSQL also run the other way the store could take them, a blocking call in a Trio worker
thread with the GIL released, to show why the store submits them for a ticket instead.
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
from tests.postgres_server import PostgresServer

from postwire._core import PgTables, WriteBatch
from postwire.store.spool import Spool
from postwire.store.table_store import open_table_store

TABLES = ("emails", "email_index", "counters")
RECORD = 300
PRELOADED = 20_000


def percentile_ms(seconds: list[float], share: float) -> float:
    """Nearest-rank percentile, in milliseconds."""
    ordered = sorted(seconds)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] * 1000


async def commit_rate(tables: Spool, tasks: int, seconds: float) -> tuple[int, float]:
    """Batches committed by `tasks` concurrent writers in about `seconds`; the rate."""
    committed = 0
    payload = random.Random(1).randbytes(RECORD)
    deadline = trio.current_time() + seconds

    async def writer(n: int) -> None:
        nonlocal committed
        i = 0
        while trio.current_time() < deadline:
            key = f"w{n:04d}-{i:08d}".encode()
            batch = WriteBatch()
            batch.put("emails", key, payload)
            batch.insert("email_index", b"status/sent/" + key, payload)
            batch.add_counter("counters", b"sent", 1)
            await tables.commit(batch)
            committed += 1
            i += 1

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for n in range(tasks):
            nursery.start_soon(writer, n)
    return committed, committed / (time.perf_counter() - started)


async def preload(tables: Spool) -> None:
    payload = random.Random(2).randbytes(RECORD)
    for start in range(0, PRELOADED, 1000):
        batch = WriteBatch()
        for i in range(start, start + 1000):
            batch.put("emails", f"team{i % 20:02d}/{i:08d}".encode(), payload)
        await tables.commit(batch)


async def latencies(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


async def throughput(call: Callable[[], Awaitable[object]], tasks: int, calls: int) -> float:
    started = time.perf_counter()

    async def caller() -> None:
        for _ in range(calls // tasks):
            await call()

    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(caller)
    return calls / (time.perf_counter() - started)


def random_key(rng: random.Random) -> bytes:
    i = rng.randrange(PRELOADED)
    return f"team{i % 20:02d}/{i:08d}".encode()


async def measure_reads(tables: Spool, calls: int) -> dict[str, float]:
    rng = random.Random(3)

    async def get() -> object:
        return await tables.aget("emails", random_key(rng))

    async def scan() -> object:
        prefix = f"team{rng.randrange(20):02d}/".encode()
        return await tables.ascan("emails", prefix=prefix, cursor=random_key(rng), limit=50)

    gets = await latencies(get, calls)
    scans = await latencies(scan, calls // 2)
    figures = {
        "get p50 ms": percentile_ms(gets, 0.5),
        "get p99 ms": percentile_ms(gets, 0.99),
        "scan(50) p50 ms": percentile_ms(scans, 0.5),
        "scan(50) p99 ms": percentile_ms(scans, 0.99),
        "gets/s, 50 tasks": await throughput(get, 50, calls * 5),
    }
    if isinstance(tables.tables, PgTables):
        core = tables.tables

        async def threaded_get() -> object:
            key = random_key(rng)
            return await trio.to_thread.run_sync(core.get, "emails", key)

        threaded = await latencies(threaded_get, calls)
        figures["get p50 ms, worker thread"] = percentile_ms(threaded, 0.5)
        figures["get p99 ms, worker thread"] = percentile_ms(threaded, 0.99)
        figures["gets/s, 50 tasks, worker thread"] = await throughput(threaded_get, 50, calls * 5)
    return figures


def transactions(server: PostgresServer, database: str) -> int:
    sql = f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'"
    return int(server.psql(sql).strip())


async def run_backend(
    backend: str, location: str, args: argparse.Namespace, server: PostgresServer
) -> dict[str, float]:
    figures: dict[str, float] = {}
    async with open_table_store(backend, location, TABLES) as tables:  # type: ignore[arg-type]
        database = location.rsplit("/", 1)[-1]
        before = transactions(server, database) if backend == "postgresql" else 0
        committed, rate = await commit_rate(tables, args.tasks, args.seconds)
        figures[f"commits/s, {args.tasks} tasks"] = rate
        if backend == "postgresql":
            # pg_stat_database is updated when a session reports, at most every 0.5 s idle.
            await trio.sleep(1.0)
            spent = transactions(server, database) - before
            figures["batches per transaction"] = committed / max(1, spent)
            figures["round trips per batch"] = 2 * spent / max(1, committed)
        await preload(tables)
        figures.update(await measure_reads(tables, args.calls))
    return figures


def cell(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="concurrent writers")
    parser.add_argument("--seconds", type=float, default=5.0, help="of committing, a backend")
    parser.add_argument("--calls", type=int, default=2000, help="timed gets a backend")
    args = parser.parse_args()
    server = PostgresServer(durable=True)
    server.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-tables-") as directory:
            lmdb = trio.run(run_backend, "lmdb", str(Path(directory) / "spool"), args, server)
            url = server.create_database()
            postgres = trio.run(run_backend, "postgresql", url, args, server)
    finally:
        server.destroy()
    rows = list(dict.fromkeys([*lmdb, *postgres]))
    print("| measure | LMDB | PostgreSQL | PostgreSQL / LMDB |")
    print("|---|---:|---:|---:|")
    for row in rows:
        a, b = lmdb.get(row), postgres.get(row)
        ratio = f"{b / a:.2f}" if a and b else ""
        print(f"| {row} | {cell(a)} | {cell(b)} | {ratio} |")


if __name__ == "__main__":
    main()
