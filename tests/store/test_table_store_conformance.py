"""The table store's contract, run against both backends (LMDB and PostgreSQL) by the
parametrized `tables` fixture: same rows in the same order, same refusals, nothing lost to
concurrency, within a process and between processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from postwire._core import WriteBatch
from postwire.errors import ConflictError, KeyExistsError, SpoolError
from postwire.store.spool import Spool
from postwire.store.table_store import open_table_store
from tests.store import table_store_contender
from tests.store.conftest import TEST_TABLES, Backend

REPO = Path(__file__).resolve().parents[2]

# Keys that sort at the edges of byte order, prefixes of each other, and across 0x7f/0x80
# (where a signed comparison would go wrong).
KEYS = [
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"a",
    b"a\x00",
    b"a\x7f",
    b"a\x80",
    b"a\xff",
    b"a\xff\xff",
    b"ab",
    b"b",
    b"\x7f",
    b"\x80",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
]


def model_scan(
    keys: list[bytes], prefix: bytes, cursor: bytes | None, reverse: bool, limit: int
) -> list[bytes]:
    """What a scan must return: the keys with `prefix`, byte order, strictly after `cursor`."""
    selected = sorted((k for k in keys if k.startswith(prefix)), reverse=reverse)
    if cursor is not None:
        selected = [k for k in selected if (k < cursor if reverse else k > cursor)]
    return selected[:limit]


async def put_all(tables: Spool, table: str, rows: dict[bytes, bytes]) -> None:
    batch = WriteBatch()
    for key, value in rows.items():
        batch.put(table, key, value)
    await tables.commit(batch)


async def test_scans_return_keys_in_byte_order_by_prefix_cursor_and_direction(
    tables: Spool,
) -> None:
    await put_all(tables, "emails", {key: b"v" + key for key in KEYS})
    cases = [
        (prefix, cursor, reverse, limit)
        for prefix in (b"", b"\x00", b"a", b"a\xff", b"\xff", b"\xff\xff", b"c")
        for cursor in (None, b"\x00", b"a\x00", b"a\xff", b"ab", b"\xff", b"\xff\xff\xff")
        for reverse in (False, True)
        for limit in (1, 3, 100)
    ]
    for prefix, cursor, reverse, limit in cases:
        rows = await tables.ascan(
            "emails", prefix=prefix, cursor=cursor, reverse=reverse, limit=limit
        )
        expected = model_scan(KEYS, prefix, cursor, reverse, limit)
        assert [k for k, _ in rows] == expected, (prefix, cursor, reverse, limit)
        assert all(v == b"v" + k for k, v in rows)
    assert await tables.ascan("emails", limit=0) == []
    assert await tables.acount("emails") == len(KEYS)
    assert await tables.aget("emails", b"\xff\x00") == b"v\xff\x00"
    assert await tables.aget("emails", b"\xfe") is None


async def test_paging_with_the_last_key_as_cursor_visits_every_row_once(
    tables: Spool,
) -> None:
    keys = [f"team1/{i:04d}".encode() for i in range(250)]
    await put_all(tables, "emails", dict.fromkeys(keys, b"x"))
    await put_all(tables, "emails", {b"team0/x": b"x", b"team2/x": b"x"})
    for reverse in (False, True):
        seen: list[bytes] = []
        cursor: bytes | None = None
        while page := await tables.ascan(
            "emails", prefix=b"team1/", cursor=cursor, reverse=reverse, limit=40
        ):
            seen += [k for k, _ in page]
            cursor = page[-1][0]
        assert seen == sorted(keys, reverse=reverse)


async def test_an_insert_of_a_taken_key_fails_and_changes_nothing(tables: Spool) -> None:
    first = WriteBatch()
    first.insert("emails", b"idem:1", b"first")
    await tables.commit(first)
    second = WriteBatch()
    second.put("emails", b"other", b"x")
    second.insert("emails", b"idem:1", b"second")
    with pytest.raises(KeyExistsError) as refused:
        await tables.commit(second)
    assert (refused.value.table, refused.value.key) == ("emails", b"idem:1")
    assert await tables.aget("emails", b"idem:1") == b"first"
    assert await tables.aget("emails", b"other") is None


async def test_racing_inserts_of_one_key_let_exactly_one_through(tables: Spool) -> None:
    winners: list[int] = []

    async def claim(n: int) -> None:
        batch = WriteBatch()
        batch.insert("emails", b"idem:race", str(n).encode())
        batch.add_counter("counters", b"claims", 1)
        try:
            await tables.commit(batch)
            winners.append(n)
        except KeyExistsError:
            pass

    async with trio.open_nursery() as nursery:
        for n in range(40):
            nursery.start_soon(claim, n)
    assert len(winners) == 1
    assert await tables.aget("emails", b"idem:race") == str(winners[0]).encode()
    assert await tables.acounter("counters", b"claims") == 1


async def test_assertions_hold_on_a_value_or_on_absence(tables: Spool) -> None:
    await put_all(tables, "meta", {b"version": b"1"})
    swap = WriteBatch()
    swap.assert_value("meta", b"version", b"1")
    swap.put("meta", b"version", b"2")
    await tables.commit(swap)
    assert await tables.aget("meta", b"version") == b"2"

    create = WriteBatch()
    create.assert_value("meta", b"new", None)
    create.put("meta", b"new", b"made")
    await tables.commit(create)
    assert await tables.aget("meta", b"new") == b"made"

    # Asserting absence alone writes nothing, not even an empty row.
    guard = WriteBatch()
    guard.assert_value("meta", b"never", None)
    guard.put("emails", b"guarded", b"x")
    await tables.commit(guard)
    assert await tables.aget("meta", b"never") is None
    assert await tables.acount("meta") == 2
    assert await tables.aget("emails", b"guarded") == b"x"


@pytest.mark.parametrize(
    ("key", "expected"),
    [(b"version", b"1"), (b"version", None), (b"missing", b"1")],
    ids=["value-changed", "not-absent", "absent-not-value"],
)
async def test_a_failed_assertion_fails_the_whole_batch(
    tables: Spool, key: bytes, expected: bytes | None
) -> None:
    await put_all(tables, "meta", {b"version": b"2"})
    batch = WriteBatch()
    batch.put("emails", b"e1", b"x")
    batch.add_counter("counters", b"c", 1)
    batch.assert_value("meta", key, expected)
    batch.put("meta", key, b"3")
    with pytest.raises(ConflictError) as refused:
        await tables.commit(batch)
    assert (refused.value.table, refused.value.key) == ("meta", key)
    assert await tables.aget("emails", b"e1") is None
    assert await tables.aget("counters", b"c") is None
    assert await tables.aget("meta", b"version") == b"2"
    assert await tables.aget("meta", b"missing") is None


async def test_an_assertion_checks_what_was_there_before_the_batch(tables: Spool) -> None:
    """As in LMDB, assertions are checked before any write of their batch, wherever they
    stand in it, and an assertion of absence lets the batch insert, count or write that key."""
    batch = WriteBatch()
    batch.put("meta", b"k", b"written")
    batch.assert_value("meta", b"k", None)
    batch.assert_value("counters", b"n", None)
    batch.add_counter("counters", b"n", 7)
    batch.assert_value("emails", b"i", None)
    batch.insert("emails", b"i", b"inserted")
    await tables.commit(batch)
    assert await tables.aget("meta", b"k") == b"written"
    assert await tables.acounter("counters", b"n") == 7
    assert await tables.aget("emails", b"i") == b"inserted"


async def test_counters_are_ascii_decimals_and_concurrent_adds_lose_nothing(
    tables: Spool,
) -> None:
    async def add(delta: int) -> None:
        for _ in range(5):
            batch = WriteBatch()
            batch.add_counter("counters", b"sent", delta)
            batch.add_counter("counters", b"batches", 1)
            await tables.commit(batch)

    async with trio.open_nursery() as nursery:
        for n in range(30):
            nursery.start_soon(add, 1 if n % 3 else -2)
    assert await tables.acounter("counters", b"sent") == 5 * (20 * 1 - 10 * 2)
    assert await tables.aget("counters", b"batches") == b"150"
    assert await tables.acounter("counters", b"never") == 0


async def test_a_counter_over_a_non_integer_fails_its_batch(tables: Spool) -> None:
    await put_all(tables, "counters", {b"text": b"not a number", b"n": b"41"})
    batch = WriteBatch()
    batch.add_counter("counters", b"n", 1)
    batch.add_counter("counters", b"text", 1)
    with pytest.raises(SpoolError, match="other than an integer"):
        await tables.commit(batch)
    assert await tables.aget("counters", b"n") == b"41"
    assert await tables.aget("counters", b"text") == b"not a number"


async def test_a_delete_removes_and_an_absent_key_is_fine(tables: Spool) -> None:
    await put_all(tables, "emails", {b"a": b"1", b"b": b"2"})
    batch = WriteBatch()
    batch.delete("emails", b"a")
    batch.delete("emails", b"never-there")
    await tables.commit(batch)
    assert await tables.ascan("emails") == [(b"b", b"2")]


async def test_concurrent_batches_commit_together_and_a_refused_one_fails_alone(
    tables: Spool,
) -> None:
    await put_all(tables, "emails", {b"taken": b"old"})
    results: dict[int, str] = {}

    async def write(n: int) -> None:
        batch = WriteBatch()
        batch.put("emails", f"row:{n:03d}".encode(), b"x" * 300)
        batch.add_counter("counters", b"rows", 1)
        if n % 10 == 7:
            batch.insert("emails", b"taken", b"new")
        elif n % 10 == 3:
            batch.assert_value("meta", b"absent", b"something")
        try:
            await tables.commit(batch)
            results[n] = "committed"
        except KeyExistsError:
            results[n] = "exists"
        except ConflictError:
            results[n] = "conflict"

    async with trio.open_nursery() as nursery:
        for n in range(100):
            nursery.start_soon(write, n)
    committed = sorted(n for n, r in results.items() if r == "committed")
    assert committed == [n for n in range(100) if n % 10 not in (3, 7)]
    assert sorted(n for n, r in results.items() if r == "exists") == list(range(7, 100, 10))
    assert sorted(n for n, r in results.items() if r == "conflict") == list(range(3, 100, 10))
    rows = await tables.ascan("emails", prefix=b"row:", limit=1000)
    assert [k for k, _ in rows] == [f"row:{n:03d}".encode() for n in committed]
    assert await tables.acounter("counters", b"rows") == len(committed)
    assert await tables.aget("emails", b"taken") == b"old"


async def test_several_processes_count_and_swap_without_losing_an_update(
    backend: Backend, store_location: str
) -> None:
    processes, tasks, rounds = 3, 4, 15
    command = [
        sys.executable,
        "-m",
        table_store_contender.__name__,
        backend,
        store_location,
        str(tasks),
        str(rounds),
    ]

    async def contender() -> None:
        done = await trio.run_process(command, cwd=REPO, capture_stdout=True, check=True)
        assert done.stdout.strip().isdigit()

    async with trio.open_nursery() as nursery:
        for _ in range(processes):
            nursery.start_soon(contender)
    async with open_table_store(backend, store_location, TEST_TABLES) as tables:
        total = processes * tasks * rounds
        assert await tables.acounter("counters", table_store_contender.COUNTER) == total
        assert await tables.acounter("meta", table_store_contender.SWAPPED) == total
