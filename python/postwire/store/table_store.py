"""The table store opened on its own, through the service's door (`store/spool.py`'s `Spool`):
for the conformance suite, which runs the same tests on both backends, and the table store's
benchmark. Reads are the parked ones (`aget`, `ascan`, `acount`, `acounter`), commits the
service's own `commit`, so what they check is what the service runs.

- `lmdb`: the tables in an LMDB environment at `location` (as the embedded default keeps them
  in the spool's);
- `postgresql`: the tables in the database at `location`, beside a scratch spool of the node's
  own (the door needs one; nothing of the tables goes there).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import trio

from postwire import _core
from postwire.store.spool import TABLES, Spool


@asynccontextmanager
async def open_table_store(
    backend: Literal["lmdb", "postgresql"], location: str, tables: Sequence[str] = TABLES
) -> AsyncIterator[Spool]:
    """The tables on `backend`, at `location` (an LMDB directory or a PostgreSQL URL), for the
    life of the block."""
    with tempfile.TemporaryDirectory(prefix="postwire-spool-") as scratch:
        if backend == "lmdb":
            spool_dir, apart = Path(location), None
        else:
            spool_dir = Path(scratch)
            apart = await trio.to_thread.run_sync(
                lambda: _core.PgTables(location, tables=list(tables))
            )
        core = await trio.to_thread.run_sync(lambda: _core.Spool(spool_dir, tables=list(tables)))
        spool = Spool(core, tables=apart)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spool.dispatch_completions)
            try:
                yield spool
            finally:
                with trio.CancelScope(shield=True):
                    await spool.close()
                nursery.cancel_scope.cancel()
