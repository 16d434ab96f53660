"""CSV imports of contacts: durable background jobs."""

from __future__ import annotations

import trio

from postwire.config import Config
from postwire.services import ServiceDeps


async def serve_contact_imports(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run queued contact imports until the stage stops."""
    task_status.started()
    await deps.stopping.wait()
