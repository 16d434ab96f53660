"""`postwire store copy --to URL`: a node's tables moved from LMDB into PostgreSQL, counted and
checked.

The service must be stopped: the command refuses while a live `postwire serve` holds the data
directory, and holds the directory's claim itself for the length of the copy (the claim `serve`
takes, `store.running_service`), so that a `serve` started meanwhile refuses to run on tables
half copied. Every table of the table store (`spool.shared_tables()`: not the node's own,
`two_stores.LOCAL_TABLES`, which stay in its spool) is copied row by row in key order, a few
thousand rows a commit, into a database whose tables hold no rows (or, with `replace`, once
they were emptied). Then each table is read again on both sides: the row counts and a SHA-256
of every key and value in key order must be equal, or the copy failed. The LMDB copy is only
read: it is left as it was.
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
from postwire.config import Config, env_var_name
from postwire.errors import PostwireError
from postwire.operator.output import table
from postwire.operator.store_access import opened_spool
from postwire.store.running_service import (
    AlreadyRunningError,
    RunningService,
    ServiceProcess,
    claim_data_dir,
    forget_service_record,
    is_alive,
    read_service_record,
)
from postwire.store.spool import Spool, shared_tables

# Rows read from either store at a time, and what one commit into PostgreSQL carries at most:
# a few thousand rows, fewer when they are large (images, uploaded CSV files).
PAGE_ROWS = 256
COMMIT_ROWS = 2000
COMMIT_BYTES = 16 * 1024 * 1024
# What the claim of the data directory says while the copy holds it, should a `serve` start.
CLAIM_ADDRESSES = ["no address: `postwire store copy` is moving the tables to PostgreSQL"]

Rows = list[tuple[bytes, bytes]]
Scan = Callable[[str, bytes | None], Awaitable[Rows]]


class StoreCopyRefused(PostwireError):
    """The copy cannot start: the service runs, or the database holds rows already."""


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
    """What `copy_tables` did: the database (its URL less the password), the rows it removed
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


async def copy_tables(config: Config, url: str, *, replace: bool = False) -> CopyReport:
    """Copy the tables of the stopped service of `config` into the PostgreSQL database at
    `url`, then check every table on both sides (see the module docstring)."""
    if config.store.backend != "lmdb":
        raise StoreCopyRefused(
            f"the tables are in {config.store.backend} already (store.backend): this copies "
            'them out of LMDB, for a config with store.backend = "lmdb"'
        )
    if not (config.data_dir / "spool").is_dir():
        raise StoreCopyRefused(f"no Postwire data in {config.data_dir}: nothing to copy")
    async with opened_spool(config) as spool:
        await _hold_data_dir(spool, config)
        try:
            return await _copy_into(spool, url, replace=replace)
        finally:
            with trio.CancelScope(shield=True):
                await forget_service_record(spool)


async def _hold_data_dir(spool: Spool, config: Config) -> None:
    """Refuse while a service runs on the data directory; else claim it, as `serve` does."""
    _refuse_if_running(spool, config)
    try:
        await claim_data_dir(spool, config, addresses=CLAIM_ADDRESSES)
    except AlreadyRunningError:  # a serve claimed it since the check above
        _refuse_if_running(spool, config)
        raise


def _refuse_if_running(spool: Spool, config: Config) -> None:
    record = read_service_record(spool)
    now_ms = spool.clock_ms()
    live: list[RunningService | ServiceProcess] = [
        row
        for row in [record.claim, *record.processes]
        if row is not None and is_alive(row, now_ms)
    ]
    if live:
        raise StoreCopyRefused(
            f"Postwire runs on the data directory {config.data_dir}: pid {live[0].pid} on host "
            f"{live[0].host}. Stop it first (kill {live[0].pid}, or Ctrl-C where it runs): the "
            "tables are copied from a stopped service, so that none changes during the copy"
        )


async def _copy_into(spool: Spool, url: str, *, replace: bool) -> CopyReport:
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
            raise StoreCopyRefused(
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


def describe_copy(report: CopyReport, config: Config) -> str:
    """The table of counts, and what to do next (or what went wrong)."""
    rows = [
        {
            "table": check.table,
            "lmdb": check.lmdb_rows,
            "postgresql": check.postgresql_rows,
            "sha256": check.postgresql_sha256[:16],
            "check": "ok" if check.matches else "MISMATCH",
        }
        for check in report.tables
    ]
    columns = [("table", "TABLE"), ("lmdb", "LMDB ROWS"), ("postgresql", "POSTGRESQL ROWS"),
               ("sha256", "SHA-256"), ("check", "CHECK")]  # fmt: skip
    total = sum(check.postgresql_rows for check in report.tables)
    lines = [table(rows, columns), ""]
    if report.removed_rows:
        lines.append(f"{report.removed_rows} rows that the database held were deleted first.")
    if report.mismatched:
        lines.append(
            f"The copy in {report.url} does NOT match the LMDB tables in: "
            f'{", ".join(report.mismatched)}. Keep store.backend = "lmdb"; run the copy again '
            "with --replace once nothing else writes to that database."
        )
        return "\n".join(lines)
    source = config.store.path or "the spool"
    lines += [
        f"{len(report.tables)} tables, {total} rows copied into {report.url}; every table's "
        "rows and SHA-256 match.",
        f"The LMDB tables (in {source} under {config.data_dir}) are left as they were.",
        "Next, in the config file, then start `postwire serve`:",
        "",
        "    [store]",
        '    backend = "postgresql"',
        f'    url = "{report.url}"',
        "",
        *(["(with the password in place of ***)", ""] if "***@" in report.url else []),
        f"or set {env_var_name('store.backend')}=postgresql and "
        f"{env_var_name('store.url')}=<the URL given to --to>.",
    ]
    return "\n".join(lines)
