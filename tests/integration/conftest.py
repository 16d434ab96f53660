"""Fixtures of the integration tests: real SMTP peers on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver

SMTP_SINK_SEARCH_PATH = "/usr/sbin:/usr/bin:/sbin"


@pytest.fixture
def smtp_receiver() -> Iterator[Callable[..., ScriptedSmtpReceiver]]:
    """Starts scripted aiosmtpd receivers: `smtp_receiver(starttls=True, ...)` takes the
    fields of `ReceiverScript`; every receiver started is stopped after the test.
    """
    started: list[ScriptedSmtpReceiver] = []

    def start(**script: object) -> ScriptedSmtpReceiver:
        receiver = ScriptedSmtpReceiver(ReceiverScript(**script))  # type: ignore[arg-type]
        receiver.start()
        started.append(receiver)
        return receiver

    try:
        yield start
    finally:
        for receiver in started:
            receiver.stop()


@pytest.fixture
def smtp_sink() -> Iterator[tuple[str, int]]:
    """Postfix's `smtp-sink` on a loopback port: accepts everything, stores nothing."""
    binary = shutil.which("smtp-sink", path=SMTP_SINK_SEARCH_PATH)
    if binary is None:
        pytest.skip("Postfix's smtp-sink is not installed: apt-get install -y postfix")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # As root, smtp-sink insists on dropping privileges to a named user.
    as_user = ["-u", "nobody"] if os.geteuid() == 0 else []
    process = subprocess.Popen(
        [binary, *as_user, "-c", f"127.0.0.1:{port}", "100"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    stderr = process.stderr.read() if process.poll() is not None else b""
                    raise RuntimeError(f"smtp-sink did not start: {stderr!r}") from None
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
