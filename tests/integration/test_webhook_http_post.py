"""The webhook client against a real HTTP server on loopback (trio, plain and TLS): kept-alive
connections are reused, one the server dropped while idle is replaced without failing the
POST, TLS is verified against the URL's host, and the SSRF guard still decides."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import httpx
import pytest
import trio

from postwire.outbound_http import RefusedTarget
from postwire.webhooks.http_post import WebhookPoster
from tests.smtp_receiver import self_signed_certificate


@dataclass
class Server:
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    # From this request on, answer, then drop the connection without a word.
    drop_from_request: int | None = None


async def serve_connection(server: Server, stream: trio.abc.Stream) -> None:
    server.connections += 1
    buffer = b""
    async with stream:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
            while len(buffer) < length:
                buffer += await stream.receive_some(65536)
            server.requests.append(head + b"\r\n\r\n" + buffer[:length])
            buffer = buffer[length:]
            await stream.send_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            dropping = server.drop_from_request
            if dropping is not None and len(server.requests) >= dropping:
                return


@asynccontextmanager
async def http_server(tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, host="127.0.0.1"),
            partial(serve_connection, server) if tls is None else partial(serve_tls, server, tls),
            0,
        )
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


async def serve_tls(server: Server, context: ssl.SSLContext, stream: trio.SocketStream) -> None:
    tls = trio.SSLStream(stream, context, server_side=True)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError:
        return
    try:
        await serve_connection(server, tls)
    except trio.BrokenResourceError:  # a client that refused the certificate
        return


async def test_connections_are_kept_alive_and_a_dropped_one_replaced() -> None:
    async with http_server() as server:
        poster = WebhookPoster(allow_private=True)
        url = httpx.URL(f"http://127.0.0.1:{server.port}/hook")
        for n in range(5):
            assert await poster.post(url, {"svix-id": f"msg_{n}"}, b"{}") == 204
        assert server.connections == 1
        server.drop_from_request = 6  # the next answers close, unannounced
        assert await poster.post(url, {}, b"{}") == 204
        # The idle one is dead: the POST goes on a new one, and succeeds.
        assert await poster.post(url, {}, b"{}") == 204
        assert server.connections == 2 and len(server.requests) == 7
        assert server.requests[0].startswith(b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1:")
        await poster.aclose()


async def test_tls_is_verified_against_the_urls_host() -> None:
    cert, key = self_signed_certificate("localhost")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    async with http_server(server_context) as server:
        trusting = ssl.create_default_context(cafile=str(cert))
        poster = WebhookPoster(allow_private=True, tls_context=trusting)
        url = httpx.URL(f"https://localhost:{server.port}/hook")
        assert await poster.post(url, {}, b"{}") == 204
        await poster.aclose()
        # A certificate nobody vouches for is refused.
        poster = WebhookPoster(allow_private=True)
        with pytest.raises(Exception, match="TLS handshake failed"):
            await poster.post(url, {}, b"{}")
        assert len(server.requests) == 1


async def test_the_ssrf_guard_decides_before_connecting() -> None:
    async with http_server() as server:
        poster = WebhookPoster(allow_private=False)
        with pytest.raises(RefusedTarget):
            await poster.post(httpx.URL(f"http://127.0.0.1:{server.port}/"), {}, b"{}")
        assert server.connections == 0
