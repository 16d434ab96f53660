"""Fixtures of the integration tests: real SMTP peers on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.peers import require_peer
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver
from tests.smtp_sink import running_smtp_sink, smtp_sink_binary


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
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with running_smtp_sink() as address:
        yield address
