"""Riding out an unreachable table store (`StoreUnavailableError`): the services wait, never
crash.

A background service whose read or commit meets an unreachable database keeps what it was
doing, waits a while (longer each time, up to `MAX_BACKOFF_SECONDS`), and tries again; it says
so once a minute at most, and once more when the database answers again. Nothing else is
needed for it to resume: the store reconnects by itself on the next request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from postwire.errors import StoreUnavailableError

log = logging.getLogger("postwire.store")

FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 2.0
WARNING_INTERVAL_SECONDS = 60.0

ResultT = TypeVar("ResultT")


class Outage:
    """One service's view of the database being unreachable: how long to wait before the next
    try, and what has been said about it."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._backoff = 0.0
        self._since: float | None = None
        self._warned_at = 0.0

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, error: StoreUnavailableError) -> float:
        """Note a failed try; the seconds to wait before the next one."""
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if now - self._warned_at >= WARNING_INTERVAL_SECONDS:
            self._warned_at = now
            log.warning("%s waits for the database: %s", self.what, error)
        self._backoff = min(MAX_BACKOFF_SECONDS, max(FIRST_BACKOFF_SECONDS, self._backoff * 2))
        return self._backoff

    async def wait(self, error: StoreUnavailableError, stopping: trio.Event | None = None) -> None:
        """Note a failed try and sleep until the next one (or until `stopping`)."""
        with trio.move_on_after(self.failed(error)):
            await (trio.Event() if stopping is None else stopping).wait()

    def succeeded(self) -> None:
        """Note a try that reached the database; say the outage is over if there was one."""
        if self._since is not None:
            log.warning(
                "%s resumed: the database answers again (after %.1f s)",
                self.what,
                time.monotonic() - self._since,
            )
        self._since = None
        self._backoff = 0.0
        self._warned_at = 0.0

    async def retry(self, call: Callable[[], Awaitable[ResultT]]) -> ResultT:
        """`await call()` until it does not raise `StoreUnavailableError`."""
        while True:
            try:
                result = await call()
            except StoreUnavailableError as error:
                await self.wait(error)
            else:
                self.succeeded()
                return result

    async def retry_sync(self, call: Callable[[], ResultT]) -> ResultT:
        """`call()` (a synchronous read) until it does not raise `StoreUnavailableError`."""

        async def once() -> ResultT:
            return call()

        return await self.retry(once)
