"""ASGI apps served by Hypercorn's trio worker inside the service tree (the REST API and the
dashboard) share one fix: their sends shielded from cancellation."""

from __future__ import annotations

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    ASGISendEvent,
    Scope,
)


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
