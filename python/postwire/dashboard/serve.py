"""Serving the dashboard: Hypercorn's trio worker on `dashboard.listen`, inside the intake stage."""

from __future__ import annotations

import trio

from postwire.accounts.passwords import bound_password_work
from postwire.config import Config
from postwire.dashboard.app import create_dashboard
from postwire.dashboard.context import DashboardContext
from postwire.http_serving import HttpLimits, serve_http
from postwire.services import ServiceDeps


async def serve_dashboard(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard on `dashboard.listen` until the stage's `stopping` event
    (`serve_http`); report the bound URLs once listening."""
    auth = config.auth
    bound_password_work(auth.password_checks_at_once, auth.password_checks_waiting)
    app = create_dashboard(
        DashboardContext(
            config=config,
            spool=deps.spool,
            domain_verifier=deps.domain_verifier,
            delivery=deps.delivery,
            webhooks=deps.webhooks,
        )
    )
    await serve_http(
        app,
        config.dashboard.listen,
        deps.stopping,
        name="dashboard",
        key="dashboard.listen",
        limits=HttpLimits.of(config),
        task_status=task_status,
    )
