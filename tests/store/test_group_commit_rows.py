"""Batches committed together keep each batch's meaning, on both backends: on PostgreSQL a
group's rows of one kind and table are written by one statement, so these tests make groups
where rows of many batches meet (concurrent batches, many rows of a kind) and check that every
batch is still applied in its own order, refused alone, and counted exactly."""

from __future__ import annotations

import pytest
import trio

from postwire._core import WriteBatch
from postwire.errors import KeyExistsError, SpoolError
from postwire.store.spool import Spool
from tests.store.test_table_store_conformance import put_all


async def commit_concurrently(tables: Spool, batches: list[WriteBatch]) -> list[str]:
    """Commit `batches` at once (so they share group commits); what became of each."""
    results = [""] * len(batches)

    async def commit(n: int) -> None:
        try:
            await tables.commit(batches[n])
            results[n] = "committed"
        except KeyExistsError as refused:
            results[n] = f"exists {refused.key.decode()}"
        except SpoolError as error:
            results[n] = f"failed {error}"

    async with trio.open_nursery() as nursery:
        for n in range(len(batches)):
            nursery.start_soon(commit, n)
    return results


async def test_a_taken_key_among_many_inserts_refuses_its_batch_alone(tables: Spool) -> None:
    await put_all(tables, "emails", {b"ins:013": b"already"})
    batches = []
    for n in range(40):
        batch = WriteBatch()
        batch.insert("emails", f"ins:{n:03d}".encode(), b"new")
        batch.insert("meta", f"idem:{n:03d}".encode(), b"new")
        batch.add_counter("counters", b"accepted", 1)
        batches.append(batch)
    results = await commit_concurrently(tables, batches)
    assert results[13] == "exists ins:013"
    assert results[:13] + results[14:] == ["committed"] * 39
    assert await tables.aget("emails", b"ins:013") == b"already"
    assert await tables.aget("meta", b"idem:013") is None
    assert len(await tables.ascan("meta", prefix=b"idem:", limit=100)) == 39
    assert await tables.acounter("counters", b"accepted") == 39


async def test_a_key_written_twice_in_a_batch_keeps_the_batch_order(tables: Spool) -> None:
    batches = []
    for n in range(20):
        batch = WriteBatch()
        key = f"row:{n:02d}".encode()
        batch.put("emails", key, b"first")
        batch.put("emails", f"once:{n:02d}".encode(), b"once")
        if n % 2:
            batch.delete("emails", key)
        else:
            batch.put("emails", key, b"last")
        batches.append(batch)
    assert await commit_concurrently(tables, batches) == ["committed"] * 20
    rows = dict(await tables.ascan("emails", limit=100))
    assert rows == {
        **{f"row:{n:02d}".encode(): b"last" for n in range(0, 20, 2)},
        **{f"once:{n:02d}".encode(): b"once" for n in range(20)},
    }


async def test_counters_added_by_many_batches_sum_exactly_beside_a_set_one(
    tables: Spool,
) -> None:
    batches = []
    for n in range(60):
        batch = WriteBatch()
        batch.add_counter("counters", b"sent", 1 if n % 4 else -3)
        batch.add_counter("counters", f"team:{n % 5}".encode(), 2)
        if n == 30:  # the same key set by one batch: the adds around it still count
            batch.put("counters", b"reset", b"100")
        batch.add_counter("counters", b"reset", 1)
        batches.append(batch)
    assert await commit_concurrently(tables, batches) == ["committed"] * 60
    assert await tables.acounter("counters", b"sent") == 45 - 15 * 3
    for team in range(5):
        assert await tables.acounter("counters", f"team:{team}".encode()) == 24
    # Batches before the reset's are overwritten by it; it and those after add one each.
    assert 101 <= await tables.acounter("counters", b"reset") <= 160


async def test_a_counter_over_text_fails_only_the_batches_adding_to_it(tables: Spool) -> None:
    await put_all(tables, "counters", {b"text": b"not a number"})
    batches = []
    for n in range(30):
        batch = WriteBatch()
        batch.add_counter("counters", b"n", 1)
        if n % 10 == 4:
            batch.add_counter("counters", b"text", 1)
        batches.append(batch)
    results = await commit_concurrently(tables, batches)
    for n, result in enumerate(results):
        if n % 10 == 4:
            assert "other than an integer" in result
        else:
            assert result == "committed", n
    assert await tables.acounter("counters", b"n") == 27
    assert await tables.aget("counters", b"text") == b"not a number"


@pytest.mark.parametrize("rows", [2, 500])
async def test_one_batch_of_many_rows_of_a_kind_is_written_whole(tables: Spool, rows: int) -> None:
    batch = WriteBatch()
    for n in range(rows):
        batch.put("emails", f"p:{n:04d}".encode(), b"v" * (n % 7))
        batch.insert("meta", f"i:{n:04d}".encode(), b"")
        batch.delete("emails", f"gone:{n:04d}".encode())
    await tables.commit(batch)
    assert len(await tables.ascan("emails", prefix=b"p:", limit=1000)) == rows
    assert await tables.aget("emails", f"p:{rows - 1:04d}".encode()) == b"v" * ((rows - 1) % 7)
    assert await tables.aget("meta", b"i:0000") == b""
