"""A live `postwire serve` killed with SIGKILL in the middle of delivering, then restarted on the
same data: every accepted email still reaches the receiver (at least once; a message that was in
DATA when the process died may arrive twice) and ends `delivered` in the API, its history
showing the interrupted attempt and the redelivery."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from email.parser import BytesParser
from pathlib import Path

import pytest
import resend

from postwire.inbound.verp import parse_verp
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    serving,
    verified_domain,
    wait_until,
)
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver

EMAILS = 5


@pytest.fixture
def slow_receiver() -> Iterator[ScriptedSmtpReceiver]:
    """A receiver that takes 2 s to answer the end of DATA: delivery is in progress a while."""
    receiver = ScriptedSmtpReceiver(ReceiverScript(delay_data_end_seconds=2.0))
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def routed_server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, slow_receiver: ScriptedSmtpReceiver
) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{slow_receiver.host}:{slow_receiver.port}"},
    ) as live:
        yield live


def test_kill_mid_delivery_then_restart_delivers_everything(
    routed_server: LiveServer,
    dns_server: AuthoritativeDnsServer,
    slow_receiver: ScriptedSmtpReceiver,
) -> None:
    verified_domain(dns_server)
    sender = f"Shop <shop@{DOMAIN}>"
    ids = [
        resend.Emails.send(
            {"from": sender, "to": f"r{i}@example.org", "subject": f"#{i}", "text": "Hi!"}
        )["id"]
        for i in range(EMAILS)
    ]

    wait_until(lambda: slow_receiver.transactions_seen >= 1, "delivery has begun")
    # An attempt in progress shows on the email (the contract's last_event is unchanged).
    in_progress = [dict(resend.Emails.get(i)) for i in ids]
    assert {email["last_event"] for email in in_progress} == {"queued"}
    assert any(e["attempts"] and e["attempts"][-1]["status"] == "in_progress" for e in in_progress)
    assert routed_server.stop(signal.SIGKILL) == -signal.SIGKILL
    assert len(slow_receiver.received()) < EMAILS, "killed before everything was delivered"

    slow_receiver.script.delay_data_end_seconds = 0
    routed_server.start()
    resend.api_url = routed_server.base_url

    def arrived() -> set[str]:
        # The envelope sender names the email: bounces+{id}-{tag}@send.{domain}.
        return {
            verp.email_id
            for message in slow_receiver.received()
            if (verp := parse_verp(message.mail_from)) is not None
        }

    wait_until(lambda: set(ids) <= arrived(), "every email reached the receiver")
    wait_until(
        lambda: all(resend.Emails.get(i)["last_event"] == "delivered" for i in ids),
        "every email is delivered in the API",
    )
    assert arrived() == set(ids), "nothing but the emails sent"
    recipients = {rcpt for message in slow_receiver.received() for rcpt in message.rcpt_tos}
    assert recipients == {f"r{i}@example.org" for i in range(EMAILS)}

    # A hand-out the kill cut short is an interrupted attempt, and the next one a redelivery
    # of the same email: any second copy a receiver got has the same Message-ID.
    redelivered = 0
    for email_id in ids:
        email = dict(resend.Emails.get(email_id))
        *earlier, last = [(a["status"], a["redelivery"]) for a in email["attempts"]]
        assert all(status == "interrupted" for status, _ in earlier), email["attempts"]
        assert last == ("completed", bool(earlier)), email["attempts"]
        redelivered += bool(earlier)
        copies = [m.content for m in slow_receiver.received() if email_id in m.mail_from]
        message_ids = {BytesParser().parsebytes(c, headersonly=True)["Message-ID"] for c in copies}
        assert message_ids == {email["message_id"]}
    assert redelivered >= 1, "the message in DATA at the kill was delivered again"
