"""Worker processes: with `processes = N`, `postwire serve` runs N-1 of them beside itself.

One Python process serves SMTP and delivers on about one core (the GIL), so the others would
sit idle. A worker serves SMTP submission on the first process's listening sockets (inherited:
every process accepts from the same queue) and delivers from the shared spool: LMDB is made for
several processes, leases decide who delivers a message, and a read-change-write of a record
is a guarded change whose commit fails if another process changed it first (`Spool.guarded`).
Everything that must run once stays in the first process:
the REST API, webhook dispatch, domain verification, the idempotency sweeper, and releasing
earlier runs' leases at start, which it does before any worker starts.

The first process hands a worker its config and sockets through the worker's stdin (a pickle:
the config may not come from a file), and the worker answers "ready" on its stdout once it
serves. A worker runs in its own session, so a terminal's Ctrl-C reaches the first process
alone, which then asks each worker to stop (SIGTERM) and waits for it. The first process keeps
the worker's stdin open for the worker's whole life: a worker that reads its end of file there
has lost its parent, however it died, and stops. A worker that exits on its own is started again.
"""

from __future__ import annotations

import copyreg
import logging
import pickle
import signal
import subprocess
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from postwire.concurrency import first_of
from postwire.config import process_count
from postwire.errors import PostwireError

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.services import ServiceDeps
    from postwire.smtp.submission import ListeningSocket

log = logging.getLogger("postwire.workers")

READY_LINE = b"ready\n"
# A worker that exited on its own is started again after this long.
RESTART_DELAY_SECONDS = 1.0
# How long a stopping worker may take (its own stages have their grace periods) before SIGKILL.
STOP_TIMEOUT_SECONDS = 30.0
ORDERS_LENGTH_BYTES = 8


def _mapping_proxy(mapping: dict[str, object]) -> types.MappingProxyType[str, object]:
    return types.MappingProxyType(mapping)


# Config holds read-only mappings (`types.MappingProxyType`), which pickle cannot copy by itself.
copyreg.pickle(types.MappingProxyType, lambda proxy: (_mapping_proxy, (dict(proxy),)))


@dataclass(frozen=True, slots=True)
class WorkerOrders:
    """What the first process sends a worker: which one it is, the config, the sockets' roles."""

    index: int
    config: Config
    # (inherited file descriptor, implicit TLS) per listening socket.
    listeners: tuple[tuple[int, bool], ...]


async def serve_workers(
    config: Config,
    deps: ServiceDeps,
    *,
    listeners: Sequence[ListeningSocket],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the config's worker processes until `deps.stopping`, then stop them and return.

    Reports ready once every worker serves; a worker that exits before it is ready the first
    time is an error (its own log says why).
    """
    running: set[trio.Process] = set()

    def pass_on_hangup() -> None:
        # Workers run in sessions of their own: SIGHUP reaches them only through this process.
        for process in running:
            if process.returncode is None:
                process.send_signal(signal.SIGHUP)

    deps.reloads.register(pass_on_hangup)
    async with trio.open_nursery() as nursery:
        for index in range(1, process_count(config)):
            await nursery.start(_keep_worker, config, deps, listeners, index, running)
        task_status.started()


async def _keep_worker(
    config: Config,
    deps: ServiceDeps,
    listeners: Sequence[ListeningSocket],
    index: int,
    running: set[trio.Process],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    inherited = tuple((listener.sock.fileno(), listener.implicit_tls) for listener in listeners)
    orders = WorkerOrders(index, config, inherited)
    started = False
    while not deps.stopping.is_set():
        process = await trio.lowlevel.open_process(
            # Not `-m`: the orders' classes must unpickle as `postwire.workers`'s, not `__main__`'s.
            [sys.executable, "-c", "from postwire.worker_process import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=[fd for fd, _ in orders.listeners],
            start_new_session=True,
        )
        running.add(process)
        try:
            ready = await _hand_orders(process, orders)
            if ready and not started:
                started = True
                log.info("worker %d is ready (pid %d)", index, process.pid)
                task_status.started()
            if ready:
                await first_of(process.wait, deps.stopping.wait)
        finally:
            running.discard(process)
            with trio.CancelScope(shield=True):
                await _stop(process)
        if not started:
            raise PostwireError(
                f"worker process {index} exited with status {process.returncode} before it "
                "was ready; its log above says why"
            )
        if deps.stopping.is_set():
            return
        log.error(
            "worker %d (pid %d) exited with status %s; starting it again",
            index, process.pid, process.returncode,
        )  # fmt: skip
        await trio.sleep(RESTART_DELAY_SECONDS)


async def _hand_orders(process: trio.Process, orders: WorkerOrders) -> bool:
    """Send the worker its orders; True once it says it is ready, False if it exits first."""
    assert process.stdin is not None and process.stdout is not None
    payload = pickle.dumps(orders)
    try:  # stdin stays open: its end of file tells the worker that this process is gone
        await process.stdin.send_all(len(payload).to_bytes(ORDERS_LENGTH_BYTES, "big") + payload)
    except trio.BrokenResourceError:
        return False
    received = b""
    while READY_LINE not in received:
        chunk = await process.stdout.receive_some()
        if not chunk:
            return False
        received += chunk
    return True


async def _stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_TIMEOUT_SECONDS):
            await process.wait()
    if process.returncode is None:
        log.warning("worker (pid %d) did not stop in time; killing it", process.pid)
        process.kill()
        await process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            await pipe.aclose()
