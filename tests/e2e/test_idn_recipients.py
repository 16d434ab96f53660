"""Internationalized recipients end to end: a live `postwire serve`, the `resend` SDK, Knot DNS
serving the A-label zone of `exämple.org` and aiosmtpd receivers.

A domain is looked up and named in RCPT TO as its A-label; a non-ASCII local part needs the
receiving server's SMTPUTF8, and without it bounces at once with Postwire's own reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer, knot_binaries
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    serving,
    spool_events,
    verified_domain,
    wait_until,
)
from tests.peers import require_peer
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver

A_LABEL = "xn--exmple-cua.org"  # exämple.org


@pytest.fixture
def idn_dns() -> Iterator[AuthoritativeDnsServer]:
    """Knot DNS for `.test` (the sender's domain) and the A-label zone of exämple.org."""
    require_peer(knot_binaries(), "Knot DNS (knotd, knotc)", "knot")
    server = AuthoritativeDnsServer(zones=("test", A_LABEL))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def receivers() -> Iterator[tuple[ScriptedSmtpReceiver, ScriptedSmtpReceiver]]:
    """The MX of exämple.org (SMTPUTF8, as aiosmtpd offers it) and a server without SMTPUTF8."""
    mx, plain = ScriptedSmtpReceiver(), ScriptedSmtpReceiver(ReceiverScript(smtputf8=False))
    mx.start()
    plain.start()
    yield mx, plain
    mx.stop()
    plain.stop()


@pytest.fixture
def idn_server(
    tmp_path: Path,
    idn_dns: AuthoritativeDnsServer,
    receivers: tuple[ScriptedSmtpReceiver, ScriptedSmtpReceiver],
) -> Iterator[LiveServer]:
    mx, plain = receivers
    idn_dns.publish(A_LABEL, "MX", f"10 mx.{A_LABEL}.")
    idn_dns.publish(f"mx.{A_LABEL}", "A", mx.host)
    # exämple.org goes by its MX (on the MX receiver's port); plain.test by a route.
    routes = {"plain.test": f"{plain.host}:{plain.port}"}
    with serving(
        tmp_path, idn_dns, delivery_port=mx.port, routes=routes, allow_private_destinations=True
    ) as live:
        verified_domain(idn_dns)
        yield live


def email(live: LiveServer, email_id: str) -> dict[str, object]:
    response = httpx.get(
        f"{live.base_url}/emails/{email_id}",
        headers={"Authorization": f"Bearer {resend.api_key}"},
    )
    response.raise_for_status()
    body: dict[str, object] = response.json()
    return body


def test_idn_domains_travel_as_a_labels_and_utf8_local_parts_need_smtputf8(
    idn_server: LiveServer, receivers: tuple[ScriptedSmtpReceiver, ScriptedSmtpReceiver]
) -> None:
    # One server for both cases: starting one is most of the time.
    mx, plain = receivers
    sender = f"Shop <shop@{DOMAIN}>"
    idn = resend.Emails.send(
        {"from": sender, "to": "ann@exämple.org", "subject": "Hi", "text": "Hi!"}
    )
    utf8 = resend.Emails.send(
        {
            "from": sender,
            "to": ["josé@plain.test", "bob@plain.test"],
            "subject": "Hi",
            "text": "Hi!",
        }
    )

    # exämple.org: MX looked up as xn--exmple-cua.org, named so in RCPT TO and To:.
    wait_until(lambda: bool(mx.received()), "the MX of exämple.org received the email")
    (message,) = mx.received()
    assert message.rcpt_tos == [f"ann@{A_LABEL}"]
    assert "SMTPUTF8" not in message.mail_options  # an A-label needs no SMTPUTF8
    assert f"To: <ann@{A_LABEL}>".encode() in message.content
    wait_until(lambda: email(idn_server, idn["id"])["last_event"] == "delivered", "delivered")
    assert email(idn_server, idn["id"])["to"] == ["ann@exämple.org"]  # as it was sent

    # josé@ is never offered to a server without SMTPUTF8; bob@ is delivered.
    wait_until(lambda: bool(plain.received()), "bob's copy reached the server")
    assert plain.received()[0].rcpt_tos == ["bob@plain.test"]
    wait_until(lambda: email(idn_server, utf8["id"])["last_event"] == "bounced", "bounced")
    idn_server.stop()
    events = [e for e in spool_events(idn_server.data_dir) if e["email_id"] == utf8["id"]]
    (bounced,) = [e for e in events if e["type"] == "email.bounced"]
    assert bounced["data"]["to"] == "josé@plain.test"
    bounce = bounced["data"]["bounce"]
    assert bounce["type"] == "Transient"  # the address may be fine: not suppressed
    assert bounce["message"].startswith("Postwire did not send the email: ")
    assert "SMTPUTF8" in bounce["message"]
    (diagnostic,) = bounce["diagnosticCode"]
    assert diagnostic.startswith("local; ")  # not the server's words: it was never asked
    # Bounced at once, not retried.
    assert not [e for e in events if e["type"] == "email.delivery_delayed"]
    assert [e["data"]["to"] for e in events if e["type"] == "email.delivered"] == ["bob@plain.test"]
