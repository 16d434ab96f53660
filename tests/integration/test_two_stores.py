"""The protocol across the node's spool and a table store apart from it (`store/two_stores.py`),
on two LMDB environments: a refused spool part takes its table writes back, and a batch left
between its two commits is completed or undone at the node's next start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.errors import KeyExistsError
from postwire.store import two_stores
from postwire.store.spool import TABLES, Spool, shared_tables


@pytest.fixture
async def spool(tmp_path: Path) -> AsyncIterator[Spool]:
    async with opened(tmp_path) as spool:
        yield spool


@asynccontextmanager
async def opened(path: Path) -> AsyncIterator[Spool]:
    """The node's spool and the tables' own LMDB environment beside it, as `store.path` opens
    them."""
    core = _core.Spool(path / "spool", tables=list(TABLES))
    tables = _core.Spool(path / "tables", tables=shared_tables())
    spool = Spool(core, tables=tables, node_id="node-a")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        yield spool
        nursery.cancel_scope.cancel()
    await spool.close()


def intake(message_id: str) -> _core.WriteBatch:
    """What accepting an email writes: its message, its record, an index row, a counter."""
    batch = _core.WriteBatch()
    batch.enqueue(message_id, b"Subject: hi\r\n\r\nhello\r\n", 0, 0)
    batch.insert("emails", f"email/{message_id}".encode(), b"{}")
    batch.put("email_index", f"status/queued/{message_id}".encode(), b"")
    batch.add_counter("counters", b"accepted", 1)
    batch.put("deliveries", message_id.encode(), b"{}")  # a table of the node's own
    return batch


async def test_both_parts_commit_and_the_reservation_is_settled(spool: Spool) -> None:
    await spool.commit(intake("m1"))
    assert spool.message_body("m1") is not None
    assert spool.tables is not None and spool.tables.get("emails", b"email/m1") == b"{}"
    assert spool.core.get("emails", b"email/m1") is None  # the tables live apart
    assert spool.core.get("deliveries", b"m1") == b"{}"  # the node's own stay in the spool
    assert await two_stores.settle_reservations(spool) == 1
    assert spool.scan(two_stores.RESERVATIONS_TABLE) == []
    assert spool.scan(two_stores.DONE_TABLE) == []


async def test_a_refused_spool_part_takes_its_table_writes_back(spool: Spool) -> None:
    await spool.commit(intake("m1"))
    with pytest.raises(KeyExistsError):  # m1 is spooled already: the spool part is refused
        await spool.commit(_again("m1"))
    assert spool.get("emails", b"email/m2") is None
    assert spool.get("email_index", b"status/queued/m2") is None
    assert spool.counter("counters", b"accepted") == 1  # its add taken back
    reservations = spool.scan(two_stores.RESERVATIONS_TABLE)
    assert len(reservations) == 1  # m1's, not yet settled; m2's went with its undo


def _again(spooled_id: str) -> _core.WriteBatch:
    """A new email m2 whose batch also enqueues a message already spooled (refused)."""
    batch = intake("m2")
    batch.enqueue(spooled_id, b"again", 0, 0)
    return batch


async def test_a_batch_left_between_its_commits_is_undone_or_completed_at_start(
    tmp_path: Path,
) -> None:
    async with opened(tmp_path) as spool:
        await spool.commit(intake("done"))  # completed, never settled: the process dies
        interrupted = intake("cut")
        shared, _local = interrupted.split(set(two_stores.LOCAL_TABLES))
        undo = await two_stores.undo_of(spool, shared)
        key = two_stores.reservation_key(spool.node_id, spool.clock_ms(), "cut-reservation")
        shared.put(two_stores.RESERVATIONS_TABLE, key, two_stores.encode_undo(undo))
        await spool.commit_shared(shared)  # killed here: its spool part never committed
        spool.settled.clear()
        assert spool.get("emails", b"email/cut") == b"{}"
    async with opened(tmp_path) as spool:
        assert await spool.finish_interrupted_writes() == (1, 1)
        assert spool.get("emails", b"email/done") == b"{}"
        assert spool.message_body("done") is not None
        assert spool.get("emails", b"email/cut") is None
        assert spool.get("email_index", b"status/queued/cut") is None
        assert spool.counter("counters", b"accepted") == 1
        assert spool.scan(two_stores.RESERVATIONS_TABLE) == []
        assert spool.scan(two_stores.DONE_TABLE) == []


async def test_an_undo_applies_only_if_its_batch_landed(spool: Spool) -> None:
    """A COMMIT lost on the network may or may not have landed: its undo asserts that the
    reservation is there, so it takes nothing back when nothing was written."""
    shared, _ = intake("lost").split(set(two_stores.LOCAL_TABLES))
    undo = two_stores.encode_undo(await two_stores.undo_of(spool, shared))
    spool.undoing.append((b"node-a/0000000000000/never-landed", undo))
    await two_stores.settle_reservations(spool)
    assert spool.undoing == []
    assert spool.counter("counters", b"accepted") == 0  # not -1
