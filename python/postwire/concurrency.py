"""Small Trio patterns the services share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

import trio

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


async def first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as the first of `waits` returns (the others are cancelled), e.g.
    `await first_of(wakeup.wait, stopping.wait)`."""
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def run(wait: Callable[[], Awaitable[object]] = wait) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)


async def in_order(
    run: Callable[[ItemT], Awaitable[ResultT]], items: Sequence[ItemT], *, at_once: int
) -> list[ResultT]:
    """`[await run(item) for item in items]`, with up to `at_once` of them waiting at a time
    (reads of a table store on the network overlap their round trips). The first error is
    raised as `run` raised it, not in a group, so callers catch what they would of one call."""
    if len(items) <= 1:
        return [await run(item) for item in items]
    results: list[ResultT | None] = [None] * len(items)
    pending = iter(range(len(items)))  # shared: each runner takes the next item left

    async def runner() -> None:
        for index in pending:
            results[index] = await run(items[index])

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(min(at_once, len(items))):
                nursery.start_soon(runner)
    except BaseExceptionGroup as group:
        raise _first_error(group) from None
    return cast(list[ResultT], results)


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    error = group.exceptions[0]
    return _first_error(error) if isinstance(error, BaseExceptionGroup) else error
