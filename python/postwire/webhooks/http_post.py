"""A lean HTTP/1.1 client for webhook POSTs: kept-alive connections per endpoint, each opened
to an address the SSRF guard vetted, TLS verified against the URL's host.

Webhooks cost as much as messages, and httpx's layers were two thirds of the dispatcher's time;
a webhook POST needs little of them: one request shape, a status code back, the answer read
to its end so the connection serves the next POST. The response is read by `ResponseReader`,
a sans-IO parser of the status line, headers and body framing.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import httpx
import trio

from postwire.outbound_http import RefusedTarget, vetted_addresses

MAX_HEAD_BYTES: Final = 64 * 1024  # status line and headers of an answer
MAX_BODY_BYTES: Final = 1024 * 1024  # an answer's body is read and dropped up to this
MAX_IDLE_PER_ORIGIN: Final = 16


class HttpPostError(Exception):
    """The request failed on the way: connection lost, malformed answer, too large an answer."""


@dataclass
class ResponseReader:
    """Reads one HTTP/1.x response from bytes as they come (`feed`), until `done`."""

    status: int | None = None
    keep_alive: bool = False
    done: bool = False
    _buffer: bytearray = field(default_factory=bytearray)
    _remaining: int | None = None  # body octets still to come with Content-Length
    _chunked: bool = False
    _until_close: bool = False
    _body_read: int = 0

    def feed(self, data: bytes | bytearray) -> None:
        """Take `data`; an empty `data` is the end of the stream."""
        if not data:
            if self._until_close and self.status is not None:
                self.done = True
                return
            raise HttpPostError("the connection closed before the answer was complete")
        self._buffer += data
        while not self.done and self._step():
            pass

    def _step(self) -> bool:
        """Parse what the buffer holds; True if progress was made and more may follow."""
        if self.status is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > MAX_HEAD_BYTES:
                    raise HttpPostError("the answer's headers are too large")
                return False
            head = bytes(self._buffer[:end]).decode("latin-1")
            del self._buffer[: end + 4]
            self._head(head)
            return True
        if self._chunked:
            return self._chunk()
        if self._remaining is not None:
            taken = min(self._remaining, len(self._buffer))
            del self._buffer[:taken]
            self._remaining -= taken
            self._count(taken)
            if self._remaining == 0:
                self.done = True
            return False
        self._count(len(self._buffer))  # until close
        self._buffer.clear()
        return False

    def _head(self, head: str) -> None:
        status_line, *lines = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise HttpPostError("the answer is not HTTP/1.x")
        headers: dict[str, str] = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon:
                raise HttpPostError("a header of the answer is malformed")
            headers[name.strip().lower()] = value.strip()
        status = int(code)
        if 100 <= status < 200:  # an interim answer (we never ask for one): the real one follows
            return
        self.status = status
        connection = headers.get("connection", "").lower()
        self.keep_alive = (
            "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        )
        if status in (204, 304):
            self.done = True
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif (length := headers.get("content-length")) is not None:
            if not length.isdigit():
                raise HttpPostError("the answer's Content-Length is malformed")
            self._remaining = int(length)
            self.done = self._remaining == 0
        else:
            self._until_close = True
            self.keep_alive = False

    def _chunk(self) -> bool:
        """One chunk (size line, data, CRLF) or the last one and its trailers."""
        line_end = self._buffer.find(b"\r\n")
        if line_end < 0:
            return False
        size_text = bytes(self._buffer[:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise HttpPostError("a chunk of the answer is malformed") from None
        if size == 0:  # the last chunk, then trailer lines, then an empty line
            if self._buffer.find(b"\r\n\r\n", line_end) < 0:
                return False
            self.done = True
            return False
        if len(self._buffer) < line_end + 2 + size + 2:
            return False
        del self._buffer[: line_end + 2 + size + 2]
        self._count(size)
        return True

    def _count(self, octets: int) -> None:
        self._body_read += octets
        if self._body_read > MAX_BODY_BYTES:
            raise HttpPostError("the answer's body is too large")


@dataclass
class _Connection:
    stream: trio.abc.Stream
    reused: bool = False


class WebhookPoster:
    """POSTs to webhook endpoints over kept-alive connections, at most `MAX_IDLE_PER_ORIGIN`
    idle ones per origin. A connection is opened to an address `vetted_addresses` passed, so a
    second DNS answer cannot send it elsewhere; TLS is verified against the URL's host."""

    def __init__(self, *, allow_private: bool, tls_context: ssl.SSLContext | None = None) -> None:
        self.allow_private = allow_private
        self.tls_context = tls_context or ssl.create_default_context()
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    async def post(self, url: httpx.URL, headers: Mapping[str, str], body: bytes) -> int:
        """POST `body` to `url` and return the status code; the caller bounds the time.
        Raises `RefusedTarget` or `HttpPostError`."""
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        origin = (url.scheme, host, port)
        request = _request_bytes(url, headers, body)
        while True:
            connection = await self._connection(origin)
            reader = ResponseReader()
            received = 0
            try:
                await connection.stream.send_all(request)
                while not reader.done:
                    data = await connection.stream.receive_some(65536)
                    received += len(data)
                    reader.feed(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, HttpPostError) as error:
                await trio.aclose_forcefully(connection.stream)
                if connection.reused and received == 0:
                    continue  # the endpoint closed it while idle: once more, on a new one
                raise HttpPostError(f"the connection failed ({error})") from None
            except BaseException:
                await trio.aclose_forcefully(connection.stream)
                raise
            assert reader.status is not None
            if reader.keep_alive and len(self._idle.setdefault(origin, [])) < MAX_IDLE_PER_ORIGIN:
                self._idle[origin].append(_Connection(connection.stream, reused=True))
            else:
                await trio.aclose_forcefully(connection.stream)
            return reader.status

    async def _connection(self, origin: tuple[str, str, int]) -> _Connection:
        idle = self._idle.get(origin)
        if idle:
            return idle.pop()
        scheme, host, port = origin
        addresses = await vetted_addresses(host, port, allow_private=self.allow_private)
        for address in addresses:
            try:
                stream: trio.abc.Stream = await trio.open_tcp_stream(str(address), port)
            except OSError:
                continue
            if scheme == "https":
                tls = trio.SSLStream(stream, self.tls_context, server_hostname=host)
                try:
                    await tls.do_handshake()
                except (trio.BrokenResourceError, ssl.SSLError) as error:
                    await trio.aclose_forcefully(tls)
                    raise HttpPostError(f"the TLS handshake failed ({error})") from None
                stream = tls
            return _Connection(stream)
        raise RefusedTarget("the connection to its host failed")

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                await trio.aclose_forcefully(connection.stream)
        self._idle.clear()


def _request_bytes(url: httpx.URL, headers: Mapping[str, str], body: bytes) -> bytes:
    """The request's octets. Header values are Postwire's own (ids, signatures, the URL's
    host as httpx parsed it), never a sender's text."""
    target = url.raw_path.decode("ascii") or "/"
    lines = [f"POST {target} HTTP/1.1", f"Host: {url.netloc.decode('ascii')}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += [f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode("ascii") + body
