"""Serving an ASGI app with Hypercorn's trio worker inside the service tree: the REST API and
the dashboard, each on its own listener."""

from __future__ import annotations

import logging
from functools import partial

import hypercorn.trio
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    ASGISendEvent,
    Scope,
)
from quart import Response, request
from werkzeug.exceptions import RequestEntityTooLarge

log = logging.getLogger("postwire")


async def drain_request_body(response: Response) -> None:
    """Read what is left of the request's body before an answer decided without it goes out
    (a refusal, a redirect to sign in). Hypercorn 0.18 stalls a kept-alive connection whose
    response went out before its request's body came in, and a socket closed with the body
    unread is reset, losing the answer. A body too large to read is left, and the connection
    closed."""
    try:
        async for _ in request.body:
            pass
    except RequestEntityTooLarge:
        response.headers["Connection"] = "close"


async def serve_http(
    app: ASGIFramework,
    listen: str,
    stopping: trio.Event,
    *,
    name: str,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on `listen` ("host:port") until `stopping`; log "`name` listening on URL"
    and report the bound URLs once listening.

    On `stopping`, Hypercorn stops accepting, closes idle kept-alive connections at once and
    lets requests in flight finish within its graceful timeout, closing each connection after
    its response; cancellation closes at once.
    """
    hypercorn_config = HypercornConfig()
    hypercorn_config.bind = [listen]
    hypercorn_config.accesslog = None
    hypercorn_config.errorlog = logging.getLogger("hypercorn.error")
    hypercorn_config.graceful_timeout = 10.0
    async with trio.open_nursery() as nursery:
        urls: list[str] = await nursery.start(
            partial(
                hypercorn.trio.serve,
                with_shielded_sends(app),
                hypercorn_config,
                shutdown_trigger=stopping.wait,
                mode="asgi",
            )
        )
        log.info("%s listening on %s", name, ", ".join(urls))
        task_status.started(urls)


def with_shielded_sends(app: ASGIFramework) -> ASGIFramework:
    """`app` with each of its ASGI sends shielded from cancellation.

    Hypercorn re-arms a kept-alive connection's idle timer inside the send of the response's
    last body chunk, after telling the app the request is over; Quart-Trio then cancels the
    request's tasks, that send included, so the timer was never re-armed: an idle connection
    was closed neither after `keep_alive_timeout` nor at shutdown, where it held SIGTERM for
    the whole graceful timeout. Hypercorn shields its socket writes already, so a client
    cannot make a shielded send wait any longer than before.
    """

    async def shielded_app(
        scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        async def shielded_send(message: ASGISendEvent) -> None:
            with trio.CancelScope(shield=True):
                await send(message)

        await app(scope, receive, shielded_send)

    return shielded_app
