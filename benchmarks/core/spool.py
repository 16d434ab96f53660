"""Durable enqueues/s of 4 KiB messages: group commit under many concurrent Trio callers, against
one fsync per message (the same LMDB through the independent `lmdb` package) in the same run."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import lmdb
import trio

from postwire import _core
from postwire.store.spool import TABLES, Spool

BODY = bytes(range(256)) * 16  # 4 KiB
CALLERS = 2000


async def _group_commit_rate(path: Path, seconds: float, callers: int) -> float:
    spool = Spool(_core.Spool(path, tables=list(TABLES), map_size=16 << 30, max_batch=4096))
    done = 0
    deadline = trio.current_time() + seconds

    async def caller(n: int) -> None:
        nonlocal done
        i = 0
        while trio.current_time() < deadline:
            message_id = f"{n}-{i}"
            batch = _core.WriteBatch()
            batch.enqueue(message_id, BODY, 0, 0)
            await spool.commit(batch)
            done += 1
            i += 1

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        async with trio.open_nursery() as callers_nursery:
            for n in range(callers):
                callers_nursery.start_soon(caller, n)
        elapsed = time.perf_counter() - started
        nursery.cancel_scope.cancel()
    await spool.close()
    return done / elapsed


def _single_commit_rate(path: Path, seconds: float) -> float:
    env = lmdb.open(str(path), map_size=4 << 30, max_dbs=4)
    bodies = env.open_db(b"bodies")
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        with env.begin(write=True, db=bodies) as txn:
            txn.put(b"m%d" % done, BODY)
        done += 1
    elapsed = time.perf_counter() - started
    env.close()
    return done / elapsed


def run(seconds: float) -> dict[str, float]:
    """Enqueues/s for Postwire's group commit and for one durable commit per message."""
    with tempfile.TemporaryDirectory(dir=".") as scratch:
        root = Path(scratch)
        single = _single_commit_rate(root / "single", seconds)
        group = trio.run(_group_commit_rate, root / "group", seconds, CALLERS)
    return {"postwire group commit": group, "lmdb one commit per message": single}


if __name__ == "__main__":
    print(run(3.0))
