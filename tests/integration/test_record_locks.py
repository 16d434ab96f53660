"""`Spool.record_lock` orders writers of one record across processes: a real second process
holds a record's byte-range lock on the shared lock file, and this one waits for it."""

from __future__ import annotations

import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.store.spool import RECORD_LOCK_SLOTS, Spool

HOLD_SECONDS = 0.5

HOLDER = """
import fcntl, sys, time
fd = open(sys.argv[1], "a+")
fcntl.lockf(fd, fcntl.LOCK_EX, 1, int(sys.argv[2]))
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def slot(key: str) -> int:
    return zlib.crc32(key.encode()) % RECORD_LOCK_SLOTS


@pytest.fixture
def lock_file(tmp_path: Path) -> Path:
    return tmp_path / "records.lock"


@pytest.fixture
def spool(tmp_path: Path, lock_file: Path) -> Iterator[Spool]:
    yield Spool(_core.Spool(tmp_path / "spool", tables=["emails"]), lock_file=lock_file)


def hold_in_another_process(lock_file: Path, key: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_file), str(slot(key)), str(HOLD_SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


async def test_a_record_held_by_another_process_is_waited_for(
    spool: Spool, lock_file: Path
) -> None:
    holder = hold_in_another_process(lock_file, "email:a")
    try:
        started = trio.current_time()
        async with spool.record_lock("email:a"):
            waited = trio.current_time() - started
        assert waited >= HOLD_SECONDS * 0.6
    finally:
        holder.wait()


async def test_other_records_are_not_held_up(spool: Spool, lock_file: Path) -> None:
    other = next(f"email:{n}" for n in range(100) if slot(f"email:{n}") != slot("email:a"))
    holder = hold_in_another_process(lock_file, "email:a")
    try:
        with trio.fail_after(HOLD_SECONDS / 2):
            async with spool.record_lock(other):
                pass
    finally:
        holder.wait()


async def test_tasks_of_one_process_take_turns(spool: Spool) -> None:
    order: list[str] = []

    async def writer(name: str) -> None:
        async with spool.record_lock("email:a"):
            order.append(f"{name} in")
            await trio.sleep(0.01)
            order.append(f"{name} out")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer, "first")
        nursery.start_soon(writer, "second")
    assert order in (
        ["first in", "first out", "second in", "second out"],
        ["second in", "second out", "first in", "first out"],
    )
