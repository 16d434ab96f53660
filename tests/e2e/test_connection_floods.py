"""Floods of connections against a live `postwire serve`: idle connections and slow request
bodies past its descriptor limit (lowered with prlimit) on every listener, one client holding
more connections than its cap, and request bodies that never finish."""

from __future__ import annotations

import os
import re
import resource
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DASHBOARD_READY,
    DOMAIN,
    LiveServer,
    serving,
    verified_domain,
    wait_until,
)
from tests.e2e.test_smtp_submission import (
    free_address,
    listener,
    relaying_to_sink,
    sink_dump,  # noqa: F401  (a fixture)
    swaks,
    wait_for_smtp,
    with_smtplib,
)

METRICS_READY = re.compile(r"metrics listening on (http://\S+)")
# Descriptors the server may open beyond those it holds once ready: far fewer than the flood.
HEADROOM = 64
# Connections per HTTP listener; SMTP sessions per SMTP listener (these stay open until the
# idle timeout, so they alone keep the descriptor table full).
HTTP_FLOOD = 60
SMTP_FLOOD = 80
LISTENERS = ("REST API", "dashboard", "metrics", "SMTP submission (STARTTLS)")


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def url(address: tuple[str, int], path: str) -> str:
    return f"http://{address[0]}:{address[1]}{path}"


def connect(address: tuple[str, int], source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(address, timeout=10, source_address=(source, 0))
    return sock


def slow_body(address: tuple[str, int], path: str, source: str = "127.0.0.1") -> socket.socket:
    """A connection that sent a POST's head and the start of its 1000-byte body, and no more."""
    sock = connect(address, source)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {address[0]}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
        "email=a".encode()
    )
    return sock


def read_to_end(sock: socket.socket) -> bytes:
    """All the server sends before it closes (or resets) the connection."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def greeting(sock: socket.socket) -> bytes:
    return sock.makefile("rb").readline()


@contextmanager
def held(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        for sock in sockets:
            stack.enter_context(sock)
        yield sockets


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_every_listener_outlives_a_descriptor_flood_and_serves_after_it(
    tmp_path: Path,
    dns_server: AuthoritativeDnsServer,
    sink_dump: Path,  # noqa: F811
    swaks_path: str,
) -> None:
    with relaying_to_sink(
        tmp_path,
        dns_server,
        sink_dump,
        starttls_listen=(free_address(),),
        tls_listen=(free_address(),),
        # No cap per client: the flood comes from one address and must reach the limit.
        api_extra="max_connections_per_client = 0",
        smtp_extra="max_connections_per_client = 0",
    ) as live:
        verified_domain(dns_server)
        token = live.create_key("relay", permission="sending_access")
        cert = live.data_dir / "tls" / "smtp-cert.pem"
        starttls, implicit_tls = listener(live, "starttls_listen"), listener(live, "tls_listen")
        wait_for_smtp(starttls)
        wait_for_smtp(implicit_tls)
        api = host_port(live.base_url)
        dashboard = host_port(live.wait_for_log(DASHBOARD_READY).group(1))
        metrics = host_port(live.wait_for_log(METRICS_READY).group(1))
        assert live.process is not None
        pid = live.process.pid
        limit = open_descriptors(pid) + HEADROOM
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))

        with ExitStack() as flood:
            for turn in range(max(HTTP_FLOOD, SMTP_FLOOD)):
                if turn < HTTP_FLOOD:  # idle connections and slow bodies, alternately
                    for address, path in ((api, "/emails"), (dashboard, "/login"), (metrics, "/")):
                        sock = slow_body(address, path) if turn % 2 else connect(address)
                        flood.enter_context(sock)
                if turn < SMTP_FLOOD:
                    flood.enter_context(connect(starttls))
                    flood.enter_context(connect(implicit_tls))
            for name in (*LISTENERS, "SMTP submission (implicit TLS)"):
                live.wait_for_log(
                    rf"{re.escape(name)}.* cannot accept connections: Too many open files",
                    timeout=30,
                    what=f"{name} pausing for want of descriptors",
                )
            assert live.process.poll() is None, "the server exited"

        # The flood is over: every listener serves again, and mail goes through.
        assert live.process.poll() is None, "the server exited"
        sent = resend.Emails.send(
            {
                "from": f"Shop <shop@{DOMAIN}>",
                "to": ["ann@example.org"],
                "subject": "after the flood",
                "text": "Sent through the API.",
            }
        )
        wait_until(lambda: resend.Emails.get(sent["id"])["last_event"] == "delivered", "sent")
        assert httpx.get(url(dashboard, "/login"), timeout=10).status_code == 200
        assert httpx.get(url(metrics, "/metrics"), timeout=10).status_code == 200
        with_smtplib(starttls, token, cert, "smtplib after the flood")
        swaks(swaks_path, implicit_tls, token, cert, "swaks after the flood", "--tls-on-connect")
        assert live.process.poll() is None, "the server exited"
        assert open_descriptors(pid) < limit


def three_admitted_sessions(
    starttls: tuple[str, int], implicit_tls: tuple[str, int], context: ssl.SSLContext
) -> tuple[list[socket.socket], ssl.SSLSocket]:
    """Two STARTTLS sessions and one implicit-TLS session from 127.0.0.1, each greeted. A
    connection the client closed holds its place until the server has seen it close (the
    probe that found the listener up, say), so a refusal here is tried again."""
    deadline = time.monotonic() + 15
    while True:
        sessions = [connect(starttls), connect(starttls)]
        try:
            if all(greeting(session).startswith(b"220 ") for session in sessions):
                tls_session = context.wrap_socket(connect(implicit_tls))
                if greeting(tls_session).startswith(b"220 "):
                    return sessions, tls_session
                tls_session.close()
        except OSError:
            pass
        for session in sessions:
            session.close()
        assert time.monotonic() < deadline, "three sessions from 127.0.0.1 were never admitted"
        time.sleep(0.1)


@pytest.fixture
def capped_server(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        starttls_listen=(free_address(),),
        tls_listen=(free_address(),),
        api_extra="max_connections_per_client = 3",
        smtp_extra="max_connections_per_client = 3",
    ) as live:
        yield live


def test_a_client_past_its_connection_cap_is_refused_and_other_clients_are_not(
    capped_server: LiveServer,
) -> None:
    live = capped_server
    starttls, implicit_tls = listener(live, "starttls_listen"), listener(live, "tls_listen")
    wait_for_smtp(starttls)
    context = ssl.create_default_context(cafile=str(live.data_dir / "tls" / "smtp-cert.pem"))
    context.check_hostname = False

    # SMTP: three sessions from 127.0.0.1 over both listeners, then a fourth is told why.
    sessions, tls_session = three_admitted_sessions(starttls, implicit_tls, context)
    with held(sessions):
        with tls_session:
            with connect(starttls) as fourth:
                assert read_to_end(fourth) == (
                    b"421 4.7.0 Too many connections from your address, try again later\r\n"
                )
            with pytest.raises(OSError), context.wrap_socket(connect(implicit_tls)) as refused:
                greeting(refused)
            with connect(starttls, source="127.0.0.2") as other_client:
                assert greeting(other_client).startswith(b"220 ")
        # One session ended: 127.0.0.1 may open another.
        sessions.pop().close()

        def admitted_again() -> bool:
            with connect(starttls) as again:
                return greeting(again).startswith(b"220 ")

        wait_until(admitted_again, "a session from 127.0.0.1 is admitted again")

    # HTTP: three requests in progress hold the API's cap; the dashboard counts its own.
    api = host_port(live.base_url)
    dashboard = host_port(live.wait_for_log(DASHBOARD_READY).group(1))
    with held([slow_body(api, "/emails") for _ in range(3)]):
        with connect(api) as fourth:
            fourth.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_to_end(fourth) == b""
        with connect(api, source="127.0.0.2") as other_client:
            other_client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_to_end(other_client).startswith(b"HTTP/1.1 200 ")
        assert httpx.get(url(dashboard, "/login"), timeout=10).is_success
    assert live.process is not None and live.process.poll() is None


@pytest.fixture
def impatient_server(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> Iterator[LiveServer]:
    with serving(tmp_path, dns_server, api_extra="body_timeout_seconds = 1") as live:
        yield live


def test_a_request_body_that_never_ends_is_answered_408_and_closed(
    impatient_server: LiveServer,
) -> None:
    live = impatient_server
    api = host_port(live.base_url)
    dashboard = host_port(live.wait_for_log(DASHBOARD_READY).group(1))
    for address, path in ((dashboard, "/login"), (api, "/emails")):
        with slow_body(address, path) as stalled:
            stalled.settimeout(30)
            answer = read_to_end(stalled)
        assert answer.startswith(b"HTTP/1.1 408 "), (path, answer)
        assert b"\r\nconnection: close\r\n" in answer.lower()

    # A body that keeps coming is read whole, however long it takes past the timeout: each KiB
    # received buys a second more.
    chunk = b"x" * 16 * 1024
    with connect(dashboard) as steady:
        steady.sendall(
            b"POST /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            + f"Content-Length: {len(chunk) * 4}\r\n\r\n".encode()
        )
        for _ in range(4):
            steady.sendall(chunk)
            time.sleep(1.5)
        steady.settimeout(30)
        answer = read_to_end(steady)
    assert answer.startswith(b"HTTP/1.1 ") and not answer.startswith(b"HTTP/1.1 408 "), answer
    assert live.process is not None and live.process.poll() is None
