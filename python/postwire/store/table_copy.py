"""Copying the shared tables out of LMDB into PostgreSQL, row by row, and checking the copy
(`postwire store copy`, `operator/store_copy.py`).

Every table but the node's own (`shared_tables()`) is read from the spool's table store in key
order, a page at a time, and written into the database a few thousand rows a commit. Then each
table is read again on both sides, apart from the copy: each store's count of its rows, and a
SHA-256 of its keys and values in key order (`TableCheck`).
"""

from __future__ import annotations

import hashlib
import struct
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import PostwireError
from postwire.store.spool import Spool, shared_tables

# Rows read from either store at a time, and what one commit into PostgreSQL carries at most:
# a few thousand rows, fewer when they are large (images, uploaded CSV files).
PAGE_ROWS = 256
COMMIT_ROWS = 2000
COMMIT_BYTES = 16 * 1024 * 1024

Rows = list[tuple[bytes, bytes]]
Scan = Callable[[str, bytes | None], Awaitable[Rows]]


class TableCopyRefused(PostwireError):
    """The copy cannot start: the database's tables hold rows already."""


@dataclass(frozen=True, slots=True)
class TableCheck:
    """One table after the copy: its rows and their digest in LMDB and in PostgreSQL."""

    table: str
    lmdb_rows: int
    postgresql_rows: int
    lmdb_sha256: str
    postgresql_sha256: str

    @property
    def matches(self) -> bool:
        return (self.lmdb_rows, self.lmdb_sha256) == (self.postgresql_rows, self.postgresql_sha256)


@dataclass(frozen=True, slots=True)
class CopyReport:
    """What `copy_shared_tables` did: the database (its URL less the password), the rows it removed
    first (`replace`), and each table's check."""

    url: str
    removed_rows: int
    tables: list[TableCheck]

    @property
    def mismatched(self) -> list[str]:
        return [check.table for check in self.tables if not check.matches]

    def to_json(self) -> dict[str, Any]:
        return {
            "to": self.url,
            "removed_rows": self.removed_rows,
            "matches": not self.mismatched,
            "tables": [
                {
                    "table": check.table,
                    "lmdb_rows": check.lmdb_rows,
                    "postgresql_rows": check.postgresql_rows,
                    "lmdb_sha256": check.lmdb_sha256,
                    "postgresql_sha256": check.postgresql_sha256,
                    "matches": check.matches,
                }
                for check in self.tables
            ],
        }


async def copy_shared_tables(spool: Spool, url: str, *, replace: bool) -> CopyReport:
    """Copy the tables `spool` holds apart from the node's own into the PostgreSQL database at
    `url`, then check each on both sides. The caller makes sure nothing writes meanwhile."""
    tables = shared_tables()
    try:
        store = await trio.to_thread.run_sync(partial(_core.PgTables, url, tables=tables))
    except PostwireError as exc:
        raise PostwireError(
            f"cannot open the table store at {without_password(url)}: {exc}"
        ) from None
    try:
        occupied = {}
        for name in tables:
            if rows := await trio.to_thread.run_sync(store.count, name):
                occupied[name] = rows
        if occupied and not replace:
            held = ", ".join(f"{name} ({rows})" for name, rows in occupied.items())
            raise TableCopyRefused(
                f"the database at {without_password(url)} holds Postwire rows already, in {held}: "
                "copy into an empty database, or pass --replace to delete those rows first"
            )
        for name in occupied:
            await _empty(store, name)
        for name in tables:
            await _copy_table(spool, store, name)
        checks = [await _check_table(spool, store, name) for name in tables]
    finally:
        await trio.to_thread.run_sync(store.close)
    return CopyReport(without_password(url), sum(occupied.values()), checks)


def _lmdb_scan(spool: Spool) -> Scan:
    async def scan(name: str, cursor: bytes | None) -> Rows:
        return spool.scan(name, cursor=cursor, limit=PAGE_ROWS)  # memory-mapped: no waiting

    return scan


def _postgresql_scan(store: _core.PgTables) -> Scan:
    async def scan(name: str, cursor: bytes | None) -> Rows:
        return await trio.to_thread.run_sync(
            partial(store.scan, name, cursor=cursor, limit=PAGE_ROWS)
        )

    return scan


async def _pages(scan: Scan, name: str) -> AsyncIterator[Rows]:
    """Every row of table `name`, in key order, a page at a time."""
    cursor = None
    while rows := await scan(name, cursor):
        yield rows
        cursor = rows[-1][0]


async def _empty(store: _core.PgTables, name: str) -> None:
    async for rows in _pages(_postgresql_scan(store), name):
        batch = WriteBatch()
        for key, _ in rows:
            batch.delete(name, key)
        await trio.to_thread.run_sync(store.commit, batch)


async def _copy_table(spool: Spool, store: _core.PgTables, name: str) -> None:
    batch, rows, size = WriteBatch(), 0, 0
    async for page in _pages(_lmdb_scan(spool), name):
        for key, value in page:
            batch.put(name, key, value)
            rows, size = rows + 1, size + len(key) + len(value)
            if rows >= COMMIT_ROWS or size >= COMMIT_BYTES:
                await trio.to_thread.run_sync(store.commit, batch)
                batch, rows, size = WriteBatch(), 0, 0
    if rows:
        await trio.to_thread.run_sync(store.commit, batch)


async def _check_table(spool: Spool, store: _core.PgTables, name: str) -> TableCheck:
    """Table `name` read again on both sides, apart from the copy: each store's count of its
    rows and the digest of the rows a scan meets."""
    lmdb_sha256 = await _fingerprint(_lmdb_scan(spool), name)
    postgresql_sha256 = await _fingerprint(_postgresql_scan(store), name)
    postgresql_rows = await trio.to_thread.run_sync(store.count, name)
    return TableCheck(name, spool.count(name), postgresql_rows, lmdb_sha256, postgresql_sha256)


async def _fingerprint(scan: Scan, name: str) -> str:
    """A SHA-256 of the keys and values of table `name` in key order (each length-prefixed,
    so that rows cut differently never hash alike)."""
    digest = hashlib.sha256()
    async for page in _pages(scan, name):
        for key, value in page:
            digest.update(struct.pack(">II", len(key), len(value)))
            digest.update(key)
            digest.update(value)
    return digest.hexdigest()


def without_password(url: str) -> str:
    """`url` with its password, if any, replaced by `***`: fit to print."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
