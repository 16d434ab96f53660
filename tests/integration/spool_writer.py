"""Child process for the crash test: enqueue forever from many Trio tasks, print each id once
its commit has returned (and so is durable)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import trio

from postwire import _core
from postwire.store.spool import TABLES, Spool


def body_for(message_id: str) -> bytes:
    """4 KiB that depend on the id, so a reader can tell intact bytes from torn ones."""
    seed = hashlib.sha256(message_id.encode()).digest()
    return (seed * 128)[:4096]


async def main(path: Path, writers: int) -> None:
    spool = Spool(_core.Spool(path, tables=list(TABLES), commit_window_us=500))
    out = sys.stdout

    async def writer(n: int) -> None:
        i = 0
        while True:
            message_id = f"w{n}-{i}"
            batch = _core.WriteBatch()
            batch.enqueue(message_id, body_for(message_id), 0, 0)
            batch.put("emails", message_id.encode(), b"record:" + message_id.encode())
            await spool.commit(batch)
            out.write(message_id + "\n")
            out.flush()
            i += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        for n in range(writers):
            nursery.start_soon(writer, n)


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
