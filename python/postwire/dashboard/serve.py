"""Serving the dashboard: Hypercorn's trio worker on `dashboard.listen`, inside the intake stage."""

from __future__ import annotations

import logging
from functools import partial

import hypercorn.trio
import trio
from hypercorn.config import Config as HypercornConfig

from postwire.asgi_shield import with_shielded_sends
from postwire.config import Config
from postwire.dashboard.app import create_dashboard
from postwire.dashboard.context import DashboardContext
from postwire.services import ServiceDeps

log = logging.getLogger("postwire.dashboard")


async def serve_dashboard(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard on `dashboard.listen` until the stage's `stopping` event.

    Reports the bound URLs once listening. On `stopping`, Hypercorn stops accepting and lets
    requests in flight finish within its graceful timeout; cancellation closes at once.
    """
    app = create_dashboard(
        DashboardContext(
            config=config,
            spool=deps.spool,
            domain_verifier=deps.domain_verifier,
            delivery=deps.delivery,
            webhooks=deps.webhooks,
        )
    )
    hypercorn_config = HypercornConfig()
    hypercorn_config.bind = [config.dashboard.listen]
    hypercorn_config.accesslog = None
    hypercorn_config.errorlog = logging.getLogger("hypercorn.error")
    hypercorn_config.graceful_timeout = 10.0
    async with trio.open_nursery() as nursery:
        urls: list[str] = await nursery.start(
            partial(
                hypercorn.trio.serve,
                with_shielded_sends(app),
                hypercorn_config,
                shutdown_trigger=deps.stopping.wait,
                mode="asgi",
            )
        )
        log.info("dashboard listening on %s", ", ".join(urls))
        task_status.started(urls)
