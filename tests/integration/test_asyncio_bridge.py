"""The batching asyncio loop under SMTP submission: trio-asyncio's loop with its callbacks run in
batches must keep what asyncio code relies on (order, timers, Trio tasks started from asyncio,
an orderly shutdown) and must not starve Trio's own tasks."""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType

import pytest
import trio


@pytest.fixture
def trio_asyncio() -> ModuleType:
    """Imported by the tests that use it, as by the service: importing trio-asyncio replaces
    asyncio's event loop policy, which the browser tests collected beside these need."""
    return importlib.import_module("trio_asyncio")


def bridge() -> ModuleType:
    from postwire.smtp import asyncio_bridge

    return asyncio_bridge


def test_pinned_trio_asyncio_has_the_internals_the_batching_loop_uses(
    trio_asyncio: ModuleType,
) -> None:
    """`BatchingTrioEventLoop` overrides a private method and reads private fields: a new
    trio-asyncio release must be checked against it before the pin moves."""
    loop = trio_asyncio.TrioEventLoop()
    for name in ("_q_recv", "_timers", "_main_loop_one", "_nursery", "_stopped"):
        assert hasattr(loop, name) or hasattr(type(loop), name), name
    loop.close()


async def test_callbacks_run_in_order_across_batches(trio_asyncio: ModuleType) -> None:
    async with trio_asyncio.open_loop() as loop:
        bridge().batch_callbacks(loop)
        assert type(loop) is bridge().BatchingTrioEventLoop
        ran: list[int] = []
        done = trio.Event()
        for number in range(bridge().BATCH * 3 + 5):
            loop.call_soon(ran.append, number)
        loop.call_soon(done.set)
        await done.wait()
        assert ran == list(range(bridge().BATCH * 3 + 5))


async def test_timers_asyncio_tasks_and_trio_tasks_from_asyncio(trio_asyncio: ModuleType) -> None:
    async def on_trio(value: int) -> int:
        await trio.sleep(0.01)
        return value * 2

    async def on_asyncio() -> list[int]:
        fired: list[int] = []
        asyncio.get_running_loop().call_later(0.02, fired.append, 1)
        doubled = await trio_asyncio.trio_as_aio(on_trio)(21)
        await asyncio.sleep(0.05)
        return [doubled, *fired]

    async with trio_asyncio.open_loop() as loop:
        bridge().batch_callbacks(loop)
        assert await trio_asyncio.aio_as_trio(on_asyncio)() == [42, 1]


async def test_trio_tasks_keep_running_while_asyncio_is_busy(trio_asyncio: ModuleType) -> None:
    """A callback that requeues itself forever keeps the queue full: Trio's other tasks must
    still get the thread between batches."""
    async with trio_asyncio.open_loop() as loop:
        bridge().batch_callbacks(loop)
        spins = 0
        spinning = True

        def spin() -> None:
            nonlocal spins
            spins += 1
            if spinning:
                loop.call_soon(spin)

        loop.call_soon(spin)
        with trio.fail_after(5):
            for _ in range(100):
                await trio.sleep(0)
        assert spins > 100
        spinning = False


async def test_callbacks_queued_before_the_loop_closes_still_run(trio_asyncio: ModuleType) -> None:
    ran: list[str] = []
    async with trio_asyncio.open_loop() as loop:
        bridge().batch_callbacks(loop)
        for name in ("a", "b", "c"):
            loop.call_soon(ran.append, name)
    assert ran == ["a", "b", "c"]


def test_only_trio_asyncios_own_loop_is_converted(trio_asyncio: ModuleType) -> None:
    with pytest.raises(TypeError, match="TrioEventLoop"):
        bridge().batch_callbacks(asyncio.new_event_loop())
