"""A process contending for the same keys as others: `python -m tests.store.table_store_contender
BACKEND LOCATION TASKS ROUNDS`. Each of TASKS Trio tasks, ROUNDS times, adds 1 to a shared
counter and increments a shared value by compare-and-set (read, assert it unchanged, write,
retry on conflict). Prints the number of conflicts it retried."""

from __future__ import annotations

import sys
from typing import cast

import trio

from postwire._core import WriteBatch
from postwire.errors import ConflictError
from postwire.store.spool import Spool
from postwire.store.table_store import open_table_store
from tests.store.conftest import TEST_TABLES, Backend

COUNTER = b"hits"
SWAPPED = b"swapped"


async def swap_once(store: Spool) -> int:
    """Increment the shared value by compare-and-set; the conflicts met on the way."""
    conflicts = 0
    while True:
        current = await store.aget("meta", SWAPPED)
        batch = WriteBatch()
        batch.assert_value("meta", SWAPPED, current)
        batch.put("meta", SWAPPED, str(int(current or b"0") + 1).encode())
        try:
            await store.commit(batch)
            return conflicts
        except ConflictError:
            conflicts += 1


async def main(backend: Backend, location: str, tasks: int, rounds: int) -> None:
    conflicts = 0

    async def contend() -> None:
        nonlocal conflicts
        for _ in range(rounds):
            batch = WriteBatch()
            batch.add_counter("counters", COUNTER, 1)
            await store.commit(batch)
            conflicts += await swap_once(store)

    async with (
        open_table_store(backend, location, TEST_TABLES) as store,
        trio.open_nursery() as nursery,
    ):
        for _ in range(tasks):
            nursery.start_soon(contend)
    print(conflicts)


if __name__ == "__main__":
    trio.run(
        main,
        cast(Backend, sys.argv[1]),
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
