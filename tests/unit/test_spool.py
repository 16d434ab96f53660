"""The Trio face of the spool: awaitable group commits, refusals, leases, reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.errors import KeyExistsError, LeaseLostError, SpoolError, SpoolFullError
from postwire.store.spool import TABLES, Spool


def open_spool(path: Path, **options: int) -> Spool:
    return Spool(_core.Spool(path, tables=list(TABLES), **options))


async def test_concurrent_commits_all_become_durable(tmp_path: Path) -> None:
    spool = open_spool(tmp_path / "spool")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)

        async def send(i: int) -> None:
            batch = _core.WriteBatch()
            batch.enqueue(f"m{i}", b"x" * i, 0, 0)
            batch.put("emails", f"m{i}".encode(), b"record")
            assert await spool.commit(batch) == []

        async with trio.open_nursery() as senders:
            for i in range(500):
                senders.start_soon(send, i)
        nursery.cancel_scope.cancel()
    assert spool.core.message_count() == 500
    assert spool.message_body("m499") == b"x" * 499
    assert spool.core.count("emails") == 500
    await spool.close()


async def test_refusals_raise_in_the_caller_only(tmp_path: Path) -> None:
    spool = open_spool(tmp_path / "spool")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        first = _core.WriteBatch()
        first.insert("idempotency", b"key", b"m1")
        first.enqueue("m1", b"body", 0, 0)
        await spool.commit(first)

        again = _core.WriteBatch()
        again.insert("idempotency", b"key", b"m2")
        again.enqueue("m2", b"body", 0, 0)
        with pytest.raises(KeyExistsError) as refused:
            await spool.commit(again)
        assert refused.value.table == "idempotency"
        assert refused.value.key == b"key"
        assert spool.message_body("m2") is None

        lease = _core.WriteBatch()
        lease.lease_due(10, 10, 60_000)
        (leased,) = await spool.commit(lease)
        assert leased.id == "m1"
        stale = _core.WriteBatch()
        stale.ack("m1", leased.lease + 1)
        with pytest.raises(LeaseLostError):
            await spool.commit(stale)
        ack = _core.WriteBatch()
        ack.ack("m1", leased.lease)
        await spool.commit(ack)
        assert spool.message_state("m1") is None
        nursery.cancel_scope.cancel()
    await spool.close()
    with pytest.raises(SpoolError):
        await spool.commit(_core.WriteBatch())


async def test_full_map_is_spool_full_error(tmp_path: Path) -> None:
    spool = open_spool(tmp_path / "spool", map_size=1 << 20)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        batch = _core.WriteBatch()
        batch.enqueue("big", os.urandom(2 << 20), 0, 0)  # incompressible
        with pytest.raises(SpoolFullError):
            await spool.commit(batch)
        small = _core.WriteBatch()
        small.put("emails", b"k", b"v")
        await spool.commit(small)
        nursery.cancel_scope.cancel()
    assert spool.get("emails", b"k") == b"v"
    assert spool.message_body("big") is None
    await spool.close()


def test_scan_pages_newest_first(tmp_path: Path) -> None:
    core = _core.Spool(tmp_path / "spool", tables=["emails"])
    batch = _core.WriteBatch()
    for i in range(5):
        batch.put("emails", b"team1/%02d" % i, b"%d" % i)
    batch.put("emails", b"team2/00", b"other team")
    core.commit(batch)
    page = core.scan("emails", prefix=b"team1/", reverse=True, limit=2)
    assert [v for _, v in page] == [b"4", b"3"]
    page = core.scan("emails", prefix=b"team1/", reverse=True, cursor=page[-1][0], limit=10)
    assert [v for _, v in page] == [b"2", b"1", b"0"]
    core.close()


def test_unknown_and_reserved_tables_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SpoolError, match="reserved"):
        _core.Spool(tmp_path / "a", tables=["_bodies"])
    core = _core.Spool(tmp_path / "b", tables=["emails"])
    with pytest.raises(SpoolError, match="unknown spool table 'nope'"):
        core.get("nope", b"k")
    batch = _core.WriteBatch()
    batch.put("nope", b"k", b"v")
    with pytest.raises(SpoolError, match="unknown spool table"):
        core.commit(batch)
    core.close()
