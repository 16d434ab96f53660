"""The table store: Postwire's plain tables behind one awaitable interface, two backends.

- `LmdbTables`: the tables in the spool's LMDB environment (the embedded default). Reads are
  memory-mapped look-ups, answered at once; commits go through the spool's group commit.
- `PostgresTables`: the tables in a PostgreSQL database, for several nodes to share. The Rust
  core does the network work on a thread of its own; every call submits a request, gets a
  ticket, and parks until the dispatcher task, woken by the core's descriptor, hands back the
  answer. No Trio worker thread is held per call.

Both give the same answers for the same data: keys are ordered bytewise in both (LMDB's order,
PostgreSQL's `bytea`), so `scan` returns the same rows in the same order; a batch commits
whole or not at all, with the same refusals (`KeyExistsError`, `ConflictError`, `SpoolError`
for a counter that is not an integer).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, cast

import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import SpoolError
from postwire.store.spool import TABLES, Spool
from postwire.store.ticket_waiters import TicketWaiters


class TableStore(ABC):
    """What the services ask of the tables, whichever backend holds them."""

    @abstractmethod
    async def get(self, table: str, key: bytes) -> bytes | None: ...

    @abstractmethod
    async def scan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        """Rows whose key starts with `prefix`, in key order (or reversed), strictly after
        `cursor` in that order, at most `limit`."""

    @abstractmethod
    async def count(self, table: str) -> int: ...

    @abstractmethod
    async def commit(self, batch: WriteBatch) -> None:
        """Commit `batch` (table operations only) atomically, durably; raise on refusal."""

    @abstractmethod
    async def close(self) -> None: ...

    async def counter(self, table: str, key: bytes) -> int:
        """The integer `WriteBatch.add_counter` keeps at `key`; 0 before the first add."""
        raw = await self.get(table, key)
        return 0 if raw is None else int(raw)


class LmdbTables(TableStore):
    """The tables in the spool's LMDB environment."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path, tables: Sequence[str] = TABLES) -> AsyncIterator[LmdbTables]:
        """Open (creating) the environment in directory `path` for the life of the block."""
        core = await trio.to_thread.run_sync(lambda: _core.Spool(path, tables=list(tables)))
        spool = Spool(core)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spool.dispatch_completions)
            store = cls(spool)
            try:
                yield store
            finally:
                with trio.CancelScope(shield=True):
                    await store.close()
                nursery.cancel_scope.cancel()

    async def get(self, table: str, key: bytes) -> bytes | None:
        return self.spool.get(table, key)

    async def scan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        return self.spool.scan(table, prefix=prefix, cursor=cursor, reverse=reverse, limit=limit)

    async def count(self, table: str) -> int:
        return self.spool.count(table)

    async def commit(self, batch: WriteBatch) -> None:
        await self.spool.commit(batch)

    async def close(self) -> None:
        await self.spool.close()


class PostgresTables(TableStore):
    """The tables in a PostgreSQL database (`_core.PgTables`)."""

    def __init__(self, core: _core.PgTables) -> None:
        self.core = core
        self._tickets = TicketWaiters()
        self._closed = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls, url: str, tables: Sequence[str] = TABLES, *, schema: str = "postwire"
    ) -> AsyncIterator[PostgresTables]:
        """Connect to `url` and create what is missing, for the life of the block."""
        core = await trio.to_thread.run_sync(
            lambda: _core.PgTables(url, tables=list(tables), schema=schema)
        )
        async with trio.open_nursery() as nursery:
            store = cls(core)
            nursery.start_soon(store.dispatch_completions)
            try:
                yield store
            finally:
                with trio.CancelScope(shield=True):
                    await store.close()
                nursery.cancel_scope.cancel()

    def _check_open(self) -> None:
        if self._closed:
            raise SpoolError("the table store is closed")

    async def dispatch_completions(self) -> None:
        """Wake the callers of finished requests; runs until cancelled."""
        fd = self.core.wakeup_fd()
        while True:
            await trio.lowlevel.wait_readable(fd)
            self._wake(self.core.take_completions())

    def _wake(self, completions: list[tuple[int, object, SpoolError | None]]) -> None:
        for ticket, answer, error in completions:
            self._tickets.wake(ticket, answer, error)

    async def get(self, table: str, key: bytes) -> bytes | None:
        self._check_open()
        return cast(bytes | None, await self._tickets.wait(self.core.submit_get(table, key)))

    async def scan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        self._check_open()
        ticket = self.core.submit_scan(
            table, prefix=prefix, cursor=cursor, reverse=reverse, limit=limit
        )
        return cast(list[tuple[bytes, bytes]], await self._tickets.wait(ticket))

    async def count(self, table: str) -> int:
        self._check_open()
        return cast(int, await self._tickets.wait(self.core.submit_count(table)))

    async def commit(self, batch: WriteBatch) -> None:
        self._check_open()
        await self._tickets.wait(self.core.submit(batch))

    async def close(self) -> None:
        """Let the core finish what is queued, wake its callers, and stop its thread."""
        self._closed = True
        await trio.to_thread.run_sync(self.core.close)
        self._wake(self.core.take_completions())


@asynccontextmanager
async def open_table_store(
    backend: Literal["lmdb", "postgresql"], location: str, tables: Sequence[str] = TABLES
) -> AsyncIterator[TableStore]:
    """The table store on `backend`: at `location`, an LMDB directory or a PostgreSQL URL."""
    if backend == "lmdb":
        async with LmdbTables.open(Path(location), tables) as lmdb:
            yield lmdb
    else:
        async with PostgresTables.open(location, tables) as postgres:
            yield postgres
