"""Serving an ASGI app with Hypercorn's trio worker inside the service tree: the REST API and
the dashboard, each on its own listener."""

from __future__ import annotations

import logging
import math
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    ASGISendEvent,
    ConnectionState,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    LifespanState,
    Scope,
)
from hypercorn.utils import repr_socket_addr
from quart import Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from postwire.connections import ClientConnections, ClientSlot, accept_connections, listen_error

if TYPE_CHECKING:
    from postwire.config import Config

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


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one client may hold of an HTTP listener: open connections per client address
    (0: no cap), and time to send a request's body (see `with_body_deadline`)."""

    max_connections_per_client: int = 0
    body_timeout: float = math.inf

    @classmethod
    def of(cls, config: Config) -> HttpLimits:
        return cls(config.api.max_connections_per_client, float(config.api.body_timeout_seconds))


async def serve_http(
    app: ASGIFramework,
    listen: str,
    stopping: trio.Event,
    *,
    name: str,
    key: str,
    limits: HttpLimits,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on `listen` ("host:port", config key `key`) until `stopping`; log "`name`
    listening on URL" and report the bound URLs once listening. A bind that fails is a
    `ConfigError` naming the address, the key and its environment variable.

    Hypercorn's trio worker (`hypercorn.trio.run.worker_serve`), with its connections accepted
    by `accept_connections`: a listener out of descriptors pauses rather than fails, and a
    client past `limits.max_connections_per_client` is refused. Hypercorn closes a connection
    that sends no complete request head within its `keep_alive_timeout`; `limits.body_timeout`
    bounds the body that follows.

    On `stopping`, it stops accepting, closes idle kept-alive connections at once and lets
    requests in flight finish within its graceful timeout, closing each connection after its
    response; cancellation closes at once.
    """
    hypercorn_config = HypercornConfig()
    hypercorn_config.bind = [listen]
    hypercorn_config.accesslog = None
    hypercorn_config.errorlog = logging.getLogger("hypercorn.error")
    hypercorn_config.graceful_timeout = 10.0
    served = ASGIWrapper(with_body_deadline(with_shielded_sends(app), limits.body_timeout))
    try:
        sockets = hypercorn_config.create_sockets().insecure_sockets
    except OSError as exc:
        raise listen_error(key, listen, exc) from None
    try:
        for sock in sockets:
            sock.listen(hypercorn_config.backlog)
            sock.setblocking(False)
        await _serve_sockets(served, hypercorn_config, sockets, stopping, name, limits, task_status)
    finally:
        for sock in sockets:
            sock.close()


async def _serve_sockets(
    app: ASGIWrapper,
    hypercorn_config: HypercornConfig,
    sockets: list[socket.socket],
    stopping: trio.Event,
    name: str,
    limits: HttpLimits,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    lifespan_state: LifespanState = {}
    lifespan = Lifespan(app, hypercorn_config, lifespan_state)
    context = WorkerContext(None)
    clients = ClientConnections(limits.max_connections_per_client)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as connections:

            async def serve_connection(conn: socket.socket, slot: ClientSlot) -> None:
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
                try:
                    state = ConnectionState(lifespan_state.copy())
                    # Typed for TLS streams only; plain ones are what `worker_serve` gives it too.
                    await _Connection(app, hypercorn_config, context, state, stream)  # type: ignore[arg-type]
                finally:
                    await trio.aclose_forcefully(stream)
                    slot.release()

            def start_connection(conn: socket.socket, slot: ClientSlot) -> None:
                connections.start_soon(serve_connection, conn, slot)

            urls = [f"http://{repr_socket_addr(s.family, s.getsockname())}" for s in sockets]
            try:
                async with trio.open_nursery() as accepting:
                    for sock in sockets:
                        accepting.start_soon(
                            partial(accept_connections, sock, start_connection, clients, name=name)
                        )
                    log.info("%s listening on %s", name, ", ".join(urls))
                    task_status.started(urls)
                    await stopping.wait()
                    accepting.cancel_scope.cancel()
            finally:
                await context.terminated.set()
                connections.cancel_scope.deadline = (
                    trio.current_time() + hypercorn_config.graceful_timeout
                )
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()


class _Connection(TCPServer):
    """Hypercorn's connection, which lets go of its socket as soon as the client has closed
    it. Hypercorn waits for the keep-alive timer of an idle connection before it closes the
    socket even when the client is gone: after a flood, every dead connection waiting in the
    backlog held a descriptor for `keep_alive_timeout` once accepted, and the listener took
    minutes to drain them."""

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()  # nothing more can come: no request to wait for


# A body may take `body_timeout` seconds, and one more for each of these many bytes received:
# a slow link still sends a large upload, a client holding the connection open does not.
BODY_BYTES_PER_EXTRA_SECOND = 1024


def with_body_deadline(app: ASGIFramework, body_timeout: float) -> ASGIFramework:
    """`app`, whose requests get `body_timeout` seconds (and one more per KiB received) from
    their head to the end of their body; past that the app is told the client went away
    (Quart cancels the request), the request is answered `408 Request Timeout` unless its
    response has started, and its connection is closed (the body is unfinished, so Hypercorn
    cannot keep it alive). Quart reads every body as it comes, whatever the route does with
    it, so a route that ignores its body cannot hold the connection either. A request with
    no body costs nothing more; one with a body, a cancel scope per wait for it."""
    if body_timeout == math.inf:
        return app

    async def app_with_deadline(
        scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] != "http" or not _has_body(scope["headers"]):
            await app(scope, receive, send)
            return
        started = trio.current_time()
        received = 0
        body_whole = timed_out = response_started = False

        async def receive_in_time() -> ASGIReceiveEvent:
            nonlocal received, body_whole, timed_out
            if body_whole:
                return await receive()
            deadline = started + body_timeout + received / BODY_BYTES_PER_EXTRA_SECOND
            with trio.move_on_at(deadline):
                message = await receive()
                if message["type"] == "http.request" and message.get("more_body", False):
                    received += len(message.get("body", b""))
                else:  # the body is whole, or the client went away
                    body_whole = True
                return message
            timed_out = body_whole = True
            return {"type": "http.disconnect"}

        async def send_noting_start(message: ASGISendEvent) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        await app(scope, receive_in_time, send_noting_start)
        if timed_out and not response_started:
            await send(_TIMEOUT_START)
            await send(_TIMEOUT_BODY)

    return app_with_deadline


def _has_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request's head announces a body (a length other than 0, or chunks)."""
    for name, value in headers:
        if name.lower() == b"transfer-encoding" or (
            name.lower() == b"content-length" and value.strip() != b"0"
        ):
            return True
    return False


_TIMEOUT_TEXT = b"Request Timeout: the request's body did not arrive in time\n"
_TIMEOUT_START: HTTPResponseStartEvent = {
    "type": "http.response.start",
    "status": 408,
    "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(_TIMEOUT_TEXT)).encode()),
        (b"connection", b"close"),
    ],
    "trailers": False,
}
_TIMEOUT_BODY: HTTPResponseBodyEvent = {
    "type": "http.response.body", "body": _TIMEOUT_TEXT, "more_body": False
}  # fmt: skip


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
