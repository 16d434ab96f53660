"""A bounce that comes back later, end to end: a live `postwire serve` delivers an email to a
real Postfix, which accepts it, fails to relay it onward (550 5.1.1 from the recipient's site)
and sends its DSN to the VERP return path. That domain's mail is routed to Postwire's STARTTLS
listener, which takes the DSN without AUTH; the email then shows `bounced` in the API and its
recipient is on the suppression list. The service runs two processes: the return path the first
one made is checked by whichever takes the report. Copies of the DSN change nothing more, and a
return path with a forged tag is refused."""

from __future__ import annotations

import re
import smtplib
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, serving, spool_events, verified_domain
from tests.ports import free_address
from tests.postfix_mta import PostfixMta, postfix_unavailable, running_postfix
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver

RECIPIENT = "ann@example.org"
SAMPLES = Path(__file__).parent.parent / "data" / "inbound"
SAMPLE_VERP = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test"


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
    return free_address()


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
        processes=2,
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
    routed_server: LiveServer,
    dns_server: AuthoritativeDnsServer,
    postfix: PostfixMta,
    postwire_smtp: str,
) -> None:
    verified_domain(dns_server)
    email_id = send_order(1)
    tagged = rf"from=<(bounces\+{email_id}-[a-z2-7]{{16}}@send\.{re.escape(DOMAIN)})>"

    wait_until(lambda: re.search(tagged, postfix.maillog()) is not None, "accepted", postfix)
    match = re.search(tagged, postfix.maillog())
    assert match is not None
    verp = match[1]
    wait_until(lambda: resend.Emails.get(email_id)["last_event"] == "bounced", "bounced", postfix)

    log = postfix.maillog().splitlines()
    relayed = [line for line in log if f"to=<{RECIPIENT}>" in line]
    assert any("dsn=5.1.1, status=bounced" in line for line in relayed), log

    def dsn_returned() -> bool:  # Postfix logs Postwire's 250 after Postwire committed it
        lines = postfix.maillog().splitlines()
        return any(f"to=<{verp}>" in line and "status=sent (250 " in line for line in lines)

    wait_until(dsn_returned, "the DSN taken by Postwire", postfix)
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

    # The same DSN again, twenty times over, to either process: taken, and applied no more.
    dsn = (SAMPLES / "postfix-failed.eml").read_bytes().replace(SAMPLE_VERP.encode(), verp.encode())
    dsn = dsn.replace(b"nobody@example.org", RECIPIENT.encode()).replace(b"\n", b"\r\n")
    for _ in range(20):
        assert report(postwire_smtp, verp, dsn) == (250, b"2.0.0 OK report received")
    # A forged tag, and the untagged address anyone could write before, are refused at RCPT.
    local, _, host = verp.partition("@")
    forged = f"{local[:-1]}{'b' if local[-1] == 'a' else 'a'}@{host}"
    for address in (forged, f"bounces+{again}@{host}"):
        assert report(postwire_smtp, address, dsn) == (550, b"5.1.1 No such bounce address")

    routed_server.stop()
    events = [e["type"] for e in spool_events(routed_server.data_dir) if e["email_id"] == email_id]
    assert events.count("email.bounced") == 1, events


def report(listener: str, rcpt_to: str, content: bytes) -> tuple[int, bytes]:
    """What a remote MTA does with a report: STARTTLS, no AUTH, null envelope sender; the reply
    to RCPT if it refuses, else to DATA."""
    host, _, port = listener.rpartition(":")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # Postwire's self-signed certificate
    with smtplib.SMTP(host, int(port), timeout=10) as client:
        client.starttls(context=context)
        client.ehlo()
        client.mail("<>")
        code, reply = client.rcpt(rcpt_to)
        if code != 250:
            return code, reply
        return client.data(content)
