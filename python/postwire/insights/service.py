"""The insights service: computes each new email's insights off the send path and rechecks
authentication against live DNS on a schedule."""

from __future__ import annotations

import trio

from postwire.config import Config
from postwire.services import ServiceDeps


async def serve_insights(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    await deps.stopping.wait()
