"""Each process's operator metrics, published into the spool for the Prometheus listener.

With `processes = N`, SMTP submission and delivery run in every process but the listener only
in the first. So every worker writes a snapshot of its `OPERATOR_METRICS` into the
`process_metrics` table every `PUBLISH_SECONDS`, keyed by its process index, and the listener
reads them (its own process it reads live). A row carries the process's start time: a worker
started again begins a new row at zero, which Prometheus takes as a counter reset, so nothing
is counted twice; what a killed worker counted after its last publication is lost. A row not
renewed for `STALE_AFTER_MS` belongs to a process that is gone and is left out.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Final

import trio

from postwire._core import WriteBatch
from postwire.config import Config
from postwire.errors import SpoolError
from postwire.metrics.operator_registry import OPERATOR_METRICS
from postwire.services import ServiceDeps
from postwire.store.spool import Spool
from postwire.store.tables import Table

log = logging.getLogger("postwire.metrics")

PUBLISH_SECONDS: Final = 5.0
STALE_AFTER_MS: Final = int(3 * PUBLISH_SECONDS * 1000)


@dataclass(frozen=True, slots=True)
class ProcessMetricsRecord:
    """One process's latest snapshot (`OperatorMetrics.snapshot`)."""

    index: int
    pid: int
    started_ms: int
    published_ms: int
    numbers: dict[str, Any]


PROCESS_METRICS = Table("process_metrics", ProcessMetricsRecord)

# When this process started, as its rows and `postwire_process_start_time_seconds` tell.
PROCESS_STARTED_MS: Final = int(time.time() * 1000)


def process_key(index: int) -> str:
    return f"{index:04d}"


def own_record(index: int, now_ms: int | None = None) -> ProcessMetricsRecord:
    """This process's numbers now, as a row would hold them."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return ProcessMetricsRecord(
        index, os.getpid(), PROCESS_STARTED_MS, now_ms, OPERATOR_METRICS.snapshot(now_ms)
    )


async def publish(spool: Spool, index: int) -> None:
    batch = WriteBatch()
    PROCESS_METRICS.put(batch, process_key(index), own_record(index))
    await spool.commit(batch)


def published_records(spool: Spool, now_ms: int) -> list[ProcessMetricsRecord]:
    """The rows of processes alive (renewed within `STALE_AFTER_MS`), by index."""
    rows = PROCESS_METRICS.scan(spool, limit=10_000)
    return [record for _, record in rows if now_ms - record.published_ms <= STALE_AFTER_MS]


async def forget_earlier_runs(spool: Spool) -> None:
    """Drop every row: the first process does this before its workers start, so a worker of an
    earlier run (or a larger `processes`) is not taken for a live one."""
    rows = PROCESS_METRICS.scan(spool, limit=10_000)
    if rows:
        batch = WriteBatch()
        for key, _ in rows:
            PROCESS_METRICS.delete(batch, key)
        await spool.commit(batch)


async def serve_metrics_publication(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A worker's service: publish its numbers every `PUBLISH_SECONDS` until the stage stops,
    then once more. Does nothing when no listener reads them (`metrics.listen` empty)."""
    task_status.started()
    if not config.metrics.listen:
        await deps.stopping.wait()
        return
    while not deps.stopping.is_set():
        try:
            await publish(deps.spool, deps.process_index)
        except SpoolError as exc:  # a full spool: the numbers wait, the service does not
            log.warning("could not publish operator metrics: %s", exc)
        with trio.move_on_after(PUBLISH_SECONDS):
            await deps.stopping.wait()
    with trio.move_on_after(1.0):
        await publish(deps.spool, deps.process_index)
