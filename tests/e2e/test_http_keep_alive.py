"""Refusals decided before the request's body has arrived leave a kept-alive connection usable
(the body is read first) or, for a body over the size limit, close it: a client never waits on
a connection nothing answers. On SIGTERM, idle kept-alive connections close at once and a
request in flight is answered first. The refusals share one server; each SIGTERM test has its
own."""

from __future__ import annotations

import signal
import socket
import time
from urllib.parse import urlsplit

from tests.e2e.conftest import LiveServer


def connect(server: LiveServer) -> socket.socket:
    address = urlsplit(server.base_url)
    assert address.hostname is not None and address.port is not None
    sock = socket.create_connection((address.hostname, address.port), timeout=10)
    return sock


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_a_refusal_before_a_small_body_keeps_the_connection(shared_server: LiveServer) -> None:
    body = b'{"name":"ci"}'
    with connect(shared_server) as sock:
        head = "POST /api-keys HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.3)  # the headers alone: the body comes later, as from a slow client
        sock.sendall(body + b"GET /health HTTP/1.1\r\nHost: postwire\r\n\r\n")
        answers = read_until(sock, b'{"status":"ok"}')
    assert answers.startswith(b"HTTP/1.1 401 ")
    assert answers.count(b"HTTP/1.1 ") == 2 and b'{"status":"ok"}' in answers


def test_a_refusal_after_a_large_body_keeps_the_connection(shared_server: LiveServer) -> None:
    size = 8 * 1024 * 1024
    with connect(shared_server) as sock:
        head = "POST /emails HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {size}\r\n\r\n".encode() + b" " * size)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: postwire\r\n\r\n")
        answers = read_until(sock, b'{"status":"ok"}')
    assert answers.startswith(b"HTTP/1.1 401 ")
    assert answers.count(b"HTTP/1.1 ") == 2 and b'{"status":"ok"}' in answers


def test_a_body_too_large_to_read_closes_the_connection(shared_server: LiveServer) -> None:
    with connect(shared_server) as sock:
        head = "POST /emails HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {100 * 1024 * 1024}\r\n\r\n".encode())
        answer = read_until(sock, b"}")
        assert answer.startswith(b"HTTP/1.1 401 ")  # refused from the headers, unread
        assert b"connection: close" in answer.lower(), "the client must not reuse it"


def signal_shutdown(server: LiveServer) -> None:
    """SIGTERM once every service is ready (a signal during start-up abandons it), then wait
    until the server says it is shutting down."""
    assert server.process is not None  # started: every service is ready
    server.process.send_signal(signal.SIGTERM)
    server.wait_for_log("shutting down", what="shutting down")


def exit_status(server: LiveServer) -> int:
    """Wait for the signalled server to exit by itself (a second signal would skip the grace)."""
    assert server.process is not None
    status = server.process.wait(timeout=20)
    server.process = None
    return status


def test_sigterm_closes_an_idle_kept_alive_connection_at_once(live_server: LiveServer) -> None:
    with connect(live_server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: postwire\r\n\r\n")
        assert read_until(sock, b'{"status":"ok"}').startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        signal_shutdown(live_server)
        sock.settimeout(5)  # the graceful timeout it used to wait out is 10 s
        assert sock.recv(1) == b"", "the server closes the idle connection"
    assert exit_status(live_server) == 0
    assert time.monotonic() - started < 5


def test_sigterm_answers_a_request_in_flight_then_closes(live_server: LiveServer) -> None:
    body = b'{"name":"ci"}'
    with connect(live_server) as sock:
        # A first answer proves the server has accepted the connection: one still in the
        # listen backlog when SIGTERM arrives is never accepted, so it has nothing in flight.
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: postwire\r\n\r\n")
        assert read_until(sock, b'{"status":"ok"}').startswith(b"HTTP/1.1 200 ")
        head = "POST /api-keys HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:5])
        time.sleep(0.5)  # the head is read (the request is in flight) before the signal
        signal_shutdown(live_server)
        sock.sendall(body[5:])
        answer = read_until(sock, b"}")
        assert answer.startswith(b"HTTP/1.1 401 ")
        assert sock.recv(1) == b"", "closed after its answer: the server is stopping"
    assert exit_status(live_server) == 0
