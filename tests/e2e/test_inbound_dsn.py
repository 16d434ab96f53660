"""A bounce that comes back later, end to end: a live `postwire serve` delivers an email to a
real Postfix, which accepts it, fails to relay it onward (550 5.1.1 from the recipient's site)
and sends its DSN to the VERP return path. That domain's mail is routed to Postwire's STARTTLS
listener, which takes the DSN without AUTH; the email then shows `bounced` in the API and its
recipient is on the suppression list."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, serving, verified_domain
from tests.postfix_mta import PostfixMta, postfix_unavailable, running_postfix
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver

RECIPIENT = "ann@example.org"


@pytest.fixture
def remote_site() -> Iterator[ScriptedSmtpReceiver]:
    """The recipient's site behind Postfix: it has no such user."""
    script = ReceiverScript(refuse_recipients={RECIPIENT: "550 5.1.1 no such user"})
    receiver = ScriptedSmtpReceiver(script)
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def postwire_smtp() -> str:
    """Where Postwire's STARTTLS listener will be: Postfix must know it before Postwire starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def postfix(remote_site: ScriptedSmtpReceiver, postwire_smtp: str) -> Iterator[PostfixMta]:
    if (why := postfix_unavailable()) is not None:
        pytest.fail(why, pytrace=False)  # `make test` installs Postfix
    # The return-path host's MX would point to Postwire; the transport map stands in for it.
    with running_postfix(
        {"example.org": f"{remote_site.host}:{remote_site.port}"},
        {f"send.{DOMAIN}": postwire_smtp},
    ) as mta:
        yield mta


@pytest.fixture
def routed_server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, postfix: PostfixMta, postwire_smtp: str
) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": postfix.address},
        starttls_listen=(postwire_smtp,),
    ) as live:
        yield live


def wait_until(condition: Callable[[], bool], what: str, postfix: PostfixMta) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"not {what}; Postfix's log:\n{postfix.maillog()}"
        time.sleep(0.2)


def send_order(number: int) -> str:
    email = resend.Emails.send(
        {
            "from": f"Shop <shop@{DOMAIN}>",
            "to": RECIPIENT,
            "subject": f"Order {number}",
            "text": "Thanks for your order.",
        }
    )
    return str(email["id"])


def test_dsn_from_postfix_bounces_the_email_and_suppresses_the_recipient(
    routed_server: LiveServer, dns_server: AuthoritativeDnsServer, postfix: PostfixMta
) -> None:
    verified_domain(dns_server)
    email_id = send_order(1)
    verp = f"bounces+{email_id}@send.{DOMAIN}"

    wait_until(lambda: f"from=<{verp}>" in postfix.maillog(), "accepted by Postfix", postfix)
    wait_until(lambda: resend.Emails.get(email_id)["last_event"] == "bounced", "bounced", postfix)

    log = postfix.maillog().splitlines()
    relayed = [line for line in log if f"to=<{RECIPIENT}>" in line]
    assert any("dsn=5.1.1, status=bounced" in line for line in relayed), log
    returned = [line for line in log if f"to=<{verp}>" in line]
    assert any("status=sent (250 " in line for line in returned), "Postwire took the DSN"
    headers = {"Authorization": f"Bearer {resend.api_key}"}
    with httpx.Client(base_url=routed_server.base_url, headers=headers) as api:
        listed = api.get("/suppressions", params={"origin": "bounce"})
        assert listed.status_code == 200, listed.text
        (suppression,) = listed.json()["data"]
    assert suppression["email"] == RECIPIENT
    assert suppression["origin"] == "bounce"
    assert suppression["source_id"] == email_id

    # The next email to the address is not even attempted.
    again = send_order(2)
    wait_until(
        lambda: resend.Emails.get(again)["last_event"] == "suppressed", "suppressed", postfix
    )
    assert f"bounces+{again}@" not in postfix.maillog()
