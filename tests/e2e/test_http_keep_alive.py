"""Refusals decided before the request's body has arrived leave a kept-alive connection usable
(the body is read first) or, for a body over the size limit, close it: a client never waits on
a connection nothing answers."""

from __future__ import annotations

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


def test_a_refusal_before_a_small_body_keeps_the_connection(live_server: LiveServer) -> None:
    body = b'{"name":"ci"}'
    with connect(live_server) as sock:
        head = "POST /api-keys HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.3)  # the headers alone: the body comes later, as from a slow client
        sock.sendall(body + b"GET /health HTTP/1.1\r\nHost: postwire\r\n\r\n")
        answers = read_until(sock, b'{"status":"ok"}')
    assert answers.startswith(b"HTTP/1.1 401 ")
    assert answers.count(b"HTTP/1.1 ") == 2 and b'{"status":"ok"}' in answers


def test_a_refusal_after_a_large_body_keeps_the_connection(live_server: LiveServer) -> None:
    size = 8 * 1024 * 1024
    with connect(live_server) as sock:
        head = "POST /emails HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {size}\r\n\r\n".encode() + b" " * size)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: postwire\r\n\r\n")
        answers = read_until(sock, b'{"status":"ok"}')
    assert answers.startswith(b"HTTP/1.1 401 ")
    assert answers.count(b"HTTP/1.1 ") == 2 and b'{"status":"ok"}' in answers


def test_a_body_too_large_to_read_closes_the_connection(live_server: LiveServer) -> None:
    with connect(live_server) as sock:
        head = "POST /emails HTTP/1.1\r\nHost: postwire\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {100 * 1024 * 1024}\r\n\r\n".encode())
        answer = read_until(sock, b"}")
        assert answer.startswith(b"HTTP/1.1 401 ")  # refused from the headers, unread
        assert b"connection: close" in answer.lower(), "the client must not reuse it"
