"""Reads that wait together, on both backends: on PostgreSQL the gets of one table that reach
the store at once share one statement, so each caller must still get its own key's value."""

from __future__ import annotations

import pytest
import trio

from postwire.errors import SpoolError
from postwire.store.spool import Spool
from tests.store.test_table_store_conformance import put_all


async def test_many_gets_at_once_each_answer_their_own_key(tables: Spool) -> None:
    await put_all(
        tables, "emails", {f"e:{n:03d}".encode(): f"email {n}".encode() for n in range(0, 200, 2)}
    )
    await put_all(tables, "meta", {b"m": b"meta"})
    answers: dict[tuple[str, bytes], bytes | None] = {}

    async def get(table: str, key: bytes) -> None:
        answers[(table, key)] = await tables.aget(table, key)

    async with trio.open_nursery() as nursery:
        for n in range(200):
            nursery.start_soon(get, "emails", f"e:{n:03d}".encode())
            nursery.start_soon(get, "emails", f"e:{n % 7:03d}".encode())  # asked twice at once
        nursery.start_soon(get, "meta", b"m")
        nursery.start_soon(get, "meta", b"absent")
    for n in range(200):
        expected = f"email {n}".encode() if n % 2 == 0 else None
        assert answers[("emails", f"e:{n:03d}".encode())] == expected
    assert answers[("meta", b"m")] == b"meta"
    assert answers[("meta", b"absent")] is None


async def test_gets_of_an_unknown_table_at_once_are_each_refused(tables: Spool) -> None:
    refused = 0

    async def get(n: int) -> None:
        nonlocal refused
        with pytest.raises(SpoolError, match="unknown"):
            await tables.aget("no_such_table", f"k{n}".encode())
        refused += 1

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(get, n)
    assert refused == 20
