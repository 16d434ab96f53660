"""Small Trio patterns the services share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


async def first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as the first of `waits` returns (the others are cancelled), e.g.
    `await first_of(wakeup.wait, stopping.wait)`."""
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def run(wait: Callable[[], Awaitable[object]] = wait) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
