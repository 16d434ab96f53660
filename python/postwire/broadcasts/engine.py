"""The broadcast engine: durable jobs that walk a segment and enqueue its messages."""

from __future__ import annotations

import trio

from postwire.config import Config
from postwire.services import ServiceDeps


async def serve_broadcasts(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run due broadcasts until the stage stops."""
    task_status.started()
    await deps.stopping.wait()
