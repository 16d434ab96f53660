"""Domain health: each sending domain's bounce and complaint rates against the thresholds
mailbox providers publish, with a warning when one is crossed."""

from __future__ import annotations

import trio

from postwire.config import Config
from postwire.services import ServiceDeps


async def serve_domain_health(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    await deps.stopping.wait()
