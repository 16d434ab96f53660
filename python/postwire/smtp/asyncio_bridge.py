"""The asyncio loop aiosmtpd runs on, on top of Trio: trio-asyncio's, running its ready callbacks
in batches.

trio-asyncio runs one asyncio callback per pass through Trio's scheduler, and each pass opens a
cancel scope for the next timer (every SMTP session keeps an idle timer, so there always is
one). Under load that bookkeeping was an eighth of a submission process's time: more than
aiosmtpd's whole session. Here every callback already queued, up to `BATCH`, runs in one pass,
then Trio's other tasks get their turn; the loop waits through trio-asyncio's own code only when
nothing is queued or a timer is due. Callbacks keep their order.

It relies on trio-asyncio's internals (`_q_recv`, `_timers`, `_main_loop_one`), so the version
is pinned in `pyproject.toml` and `tests/test_asyncio_bridge.py` checks them.
"""

from __future__ import annotations

import asyncio
import heapq

import trio
from sniffio import thread_local as sniffio_library
from trio_asyncio import TrioEventLoop  # type: ignore[import-untyped]
from trio_asyncio._handles import AsyncHandle  # type: ignore[import-untyped]

# Callbacks run in one pass before Trio's other tasks (delivery, commits) get the thread back:
# enough to make the per-pass cost small, few enough that no task waits long.
BATCH = 64


class BatchingTrioEventLoop(TrioEventLoop):  # type: ignore[misc]
    """trio-asyncio's loop, whose main loop runs the callbacks already queued in batches."""

    async def _main_loop_one(self, no_wait: bool = False) -> None:
        timers = self._timers
        if no_wait or (timers and timers[0]._when <= self.time()):
            await super()._main_loop_one(no_wait)  # shutdown's drain, or a timer due
            return
        receive = self._q_recv.receive_nowait
        ran = 0
        while ran < BATCH and not self._stopped.is_set():
            try:
                handle = receive()
            except trio.WouldBlock:
                break
            ran += 1
            await self._run_handle(handle)
        if ran == 0:
            await super()._main_loop_one()  # nothing queued: wait for a callback or a timer
        else:
            await trio.lowlevel.checkpoint()

    async def _run_handle(self, handle: asyncio.Handle) -> None:
        """What trio-asyncio's `_main_loop_one` does with a handle it received."""
        if isinstance(handle, asyncio.TimerHandle):
            heapq.heappush(self._timers, handle)
        elif isinstance(handle, AsyncHandle):  # a Trio task started from asyncio
            handle._context.run(self._nursery.start_soon, handle._run, name=handle._callback)
            await handle._started.wait()
        elif not handle._cancelled:
            previous, sniffio_library.name = sniffio_library.name, "asyncio"
            try:
                handle._run()
            finally:
                sniffio_library.name = previous


def batch_callbacks(loop: asyncio.AbstractEventLoop) -> None:
    """Make the loop `trio_asyncio.open_loop` made run its callbacks in batches. The loop is
    running already: its next pass is the first to batch."""
    if type(loop) is not TrioEventLoop:
        raise TypeError(f"expected trio-asyncio's TrioEventLoop, not {type(loop).__name__}")
    loop.__class__ = BatchingTrioEventLoop
