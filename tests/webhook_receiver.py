"""A real HTTP server on loopback that receives webhook POSTs, for tests: in its own thread,
answering each request as the test says (a status, after a delay, or by hanging up)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class ReceivedPost:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()


@dataclass
class Answer:
    status: int = 200
    delay: float = 0.0
    hang_up: bool = False  # close the connection without answering


@dataclass
class WebhookReceiver:
    """`answer(n)` decides the reply to the n-th POST (0-based); every POST is recorded."""

    answer: Callable[[int], Answer] = lambda _: Answer()
    received: list[ReceivedPost] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    number = len(receiver.received)
                    receiver.received.append(
                        ReceivedPost(self.path, dict(self.headers), body, time.monotonic())
                    )
                answer = receiver.answer(number)
                time.sleep(answer.delay)
                if answer.hang_up:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def posts(self) -> list[ReceivedPost]:
        with self._lock:
            return list(self.received)
