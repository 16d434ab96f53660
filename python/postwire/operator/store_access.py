"""The running service's store, opened by an operator's command as one more process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from postwire.config import Config
from postwire.store.spool import Spool, serve_spool


@asynccontextmanager
async def opened_spool(config: Config) -> AsyncIterator[Spool]:
    """The service's spool, opened beside the running service (LMDB takes many processes,
    and guarded changes are exact between processes: `Spool.guarded`)."""
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        try:
            yield spool
        except Exception as exc:  # raised below as itself: the nursery would wrap it in a group
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
