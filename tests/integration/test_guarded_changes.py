"""Guarded changes (`Spool.guarded`): a read-change-write that loses no concurrent change, in
this process or another, with no lock between processes (the commit asserts, and a conflict
runs the change again)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import trio

from postwire import _core
from postwire.errors import ConflictError, SpoolError
from postwire.store.guards import GUARDS_TABLE, guard_slot
from postwire.store.spool import TABLES, Spool

ROUNDS = 150

# Each process adds one to a record's count, read-change-write, from several tasks at once.
INCREMENTER = """
import sys
import orjson
import trio
from postwire import _core
from postwire.store.spool import TABLES, Spool

async def add_one(spool: Spool, tally: list[int]) -> None:
    async for attempt in spool.guarded("emails/counted"):
        with attempt:
            tally[0] += 1
            raw = spool.get("emails", b"counted")
            count = 0 if raw is None else orjson.loads(raw)["count"]
            await trio.sleep(0)  # let the other tasks, and the other process, in between
            batch = _core.WriteBatch()
            batch.put("emails", b"counted", orjson.dumps({"count": count + 1}))
            await spool.commit(batch)

async def add_many(spool: Spool, rounds: int, tally: list[int]) -> None:
    for _ in range(rounds):
        await add_one(spool, tally)

async def main(path: str, rounds: int) -> None:
    spool = Spool(_core.Spool(path, tables=list(TABLES)))
    tally = [0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        async with trio.open_nursery() as tasks:
            for _ in range(4):
                tasks.start_soon(add_many, spool, rounds // 4, tally)
        nursery.cancel_scope.cancel()
    await spool.close()
    print(tally[0], flush=True)

trio.run(main, sys.argv[1], int(sys.argv[2]))
"""


@pytest.fixture
async def spool(tmp_path: Path) -> AsyncIterator[Spool]:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        yield spool
        nursery.cancel_scope.cancel()
    await spool.close()


def count(spool: Spool) -> int:
    raw = spool.get("emails", b"counted")
    return 0 if raw is None else int(orjson.loads(raw)["count"])


def test_two_processes_lose_no_increment(tmp_path: Path) -> None:
    path = tmp_path / "spool"
    _core.Spool(path, tables=list(TABLES)).close()
    command = [sys.executable, "-c", INCREMENTER, str(path), str(ROUNDS)]
    processes = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.close()
    attempts = []
    for process in processes:
        assert process.wait(timeout=60) == 0
        assert process.stdout is not None
        attempts.append(int(process.stdout.read()))
    reader = Spool(_core.Spool(path, tables=list(TABLES)))
    assert count(reader) == 2 * (ROUNDS // 4) * 4
    # Retries happened only between the processes; each change committed exactly once.
    assert sum(attempts) >= count(reader)
    reader.core.close()


async def test_a_change_committed_by_another_writer_meanwhile_runs_the_change_again(
    spool: Spool,
) -> None:
    runs = 0
    async for attempt in spool.guarded("emails/counted"):
        with attempt:
            runs += 1
            before = count(spool)
            if runs == 1:  # another process's guarded change of the record commits now
                other = _core.WriteBatch()
                other.assert_value(GUARDS_TABLE, guard_slot("emails/counted"), None)
                other.add_counter(GUARDS_TABLE, guard_slot("emails/counted"), 1)
                other.put("emails", b"counted", orjson.dumps({"count": 10}))
                spool.core.commit(other)  # straight to the core: not part of this change
            batch = _core.WriteBatch()
            batch.put("emails", b"counted", orjson.dumps({"count": before + 1}))
            await spool.commit(batch)
    assert runs == 2
    assert count(spool) == 11


async def test_a_nested_change_that_conflicts_runs_the_outer_change_again(spool: Spool) -> None:
    runs = 0
    async for outer in spool.guarded("emails/outer"):
        with outer:
            runs += 1
            async for inner in spool.guarded("emails/inner"):
                with inner:
                    if runs == 1:
                        bump = _core.WriteBatch()  # another process changes the inner record
                        bump.add_counter(GUARDS_TABLE, guard_slot("emails/inner"), 1)
                        spool.core.commit(bump)
                    batch = _core.WriteBatch()
                    batch.put("emails", b"inner", b"{}")
                    await spool.commit(batch)
    assert runs == 2
    assert spool.get("emails", b"inner") == b"{}"


async def test_an_error_in_the_body_ends_the_change_and_frees_its_keys(spool: Spool) -> None:
    with pytest.raises(ValueError, match="refused"):
        async for attempt in spool.guarded("emails/a"):
            with attempt:
                raise ValueError("refused")
    with trio.fail_after(5):  # not held any more: taken again at once, in this task or another
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(_touch, spool, "emails/a")
    assert spool.slot_locks == {}


async def _touch(spool: Spool, key: str) -> None:
    async for attempt in spool.guarded(key, [key, "emails/b"]):
        with attempt:
            batch = _core.WriteBatch()
            batch.put("emails", key.encode(), b"{}")
            await spool.commit(batch)


async def test_a_change_that_keeps_conflicting_gives_up_with_a_spool_error(spool: Spool) -> None:
    runs = 0
    with pytest.raises(SpoolError, match="gave up"):
        async for attempt in spool.guarded("emails/contended"):
            with attempt:
                runs += 1  # someone else always commits first
                raise ConflictError("changed", GUARDS_TABLE, guard_slot("emails/contended"))
    assert runs > 1
