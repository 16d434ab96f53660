"""SMTP submission end to end: a live `postwire serve`, a domain verified against Knot DNS,
real clients (swaks over STARTTLS and implicit TLS, Python's smtplib) authenticating with an
API key, delivery to Postfix's `smtp-sink`, and what arrives there verified by dkimpy against
the DKIM record Knot serves."""

from __future__ import annotations

import re
import smtplib
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import resend

from postwire.inbound.verp import parse_verp
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    dkim_verifies,
    serving,
    verified_domain,
    wait_until,
)
from tests.peers import require_peer
from tests.ports import free_address
from tests.smtp_sink import dump_directory, running_smtp_sink, smtp_sink_binary, sunk_messages


@pytest.fixture
def sink_dump() -> Iterator[Path]:
    """Where smtp-sink keeps what it receives; it writes as `nobody`."""
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with dump_directory() as directory:
        yield directory


@contextmanager
def relaying_to_sink(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, sink_dump: Path, **config: Any
) -> Iterator[LiveServer]:
    """A live server (`serving`, with `config`) delivering everything to a smtp-sink that
    keeps what it receives in `sink_dump`."""
    with (
        running_smtp_sink(sink_dump) as (host, port),
        serving(tmp_path, dns_server, routes={"*": f"{host}:{port}"}, **config) as live,
    ):
        yield live


@pytest.fixture
def smtp_server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, sink_dump: Path
) -> Iterator[LiveServer]:
    with relaying_to_sink(
        tmp_path,
        dns_server,
        sink_dump,
        starttls_listen=(free_address(),),
        tls_listen=(free_address(),),
    ) as live:
        yield live


def listener(live: LiveServer, key: str) -> tuple[str, int]:
    """The one address of `smtp.<key>` in the server's config."""
    text = live.config_path.read_text()
    match = re.search(rf'^{key} = \["([\d.]+):(\d+)"\]', text, re.MULTILINE)
    assert match is not None, text
    return match.group(1), int(match.group(2))


def wait_for_smtp(address: tuple[str, int]) -> None:
    """SMTP starts after the API has said it is ready."""
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(address, timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {address}"
            time.sleep(0.05)


def swaks(
    swaks_path: str, address: tuple[str, int], token: str, cert: Path, subject: str, *tls: str
) -> str:
    """Send with swaks; the email id from Postwire's 250 reply."""
    command = [
        swaks_path, "--server", f"{address[0]}:{address[1]}", "--from", f"shop@{DOMAIN}",
        "--to", "ann@example.org", "--header", f"From: Shop <shop@{DOMAIN}>",
        "--header", f"Subject: {subject}", "--auth", "PLAIN", "--auth-user", "postwire",
        "--auth-password", token, "--tls-verify", "--tls-ca-path", str(cert), *tls,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    accepted = re.search(r"^<[-~]  250 2\.0\.0 OK queued as (\S+)$", result.stdout, re.MULTILINE)
    assert accepted is not None, result.stdout + result.stderr
    return accepted.group(1)


def submit_over_starttls(
    address: tuple[str, int],
    token: str,
    cert: Path,
    mail: EmailMessage,
    to_addrs: list[str] | None = None,
) -> dict[str, tuple[int, bytes]]:
    """Send `mail` with smtplib over STARTTLS, signed in with `token`; the recipients refused.
    A refused DATA raises `SMTPDataError`."""
    with smtplib.SMTP(*address, timeout=30) as client:
        client.starttls(context=ssl.create_default_context(cafile=str(cert)))
        client.login("postwire", token)
        return client.send_message(mail, to_addrs=to_addrs)


def shop_mail(subject: str, to: str, text: str) -> EmailMessage:
    """A plain text message from the shop of the verified domain."""
    mail = EmailMessage()
    mail["From"] = f"Shop <shop@{DOMAIN}>"
    mail["To"] = to
    mail["Subject"] = subject
    mail.set_content(text)
    return mail


def with_smtplib(address: tuple[str, int], token: str, cert: Path, subject: str) -> str:
    mail = shop_mail(subject, "ann@example.org", "Sent with smtplib.\n")
    refused = submit_over_starttls(
        address, token, cert, mail, to_addrs=["ann@example.org", "bob@example.org"]
    )
    assert refused == {}
    # send_message keeps no reply to DATA: take the id from the API instead.
    (email,) = [e for e in resend.Emails.list()["data"] if e["subject"] == subject]
    return str(email["id"])


def test_swaks_and_smtplib_mail_is_signed_delivered_and_listed(
    smtp_server: LiveServer, dns_server: AuthoritativeDnsServer, sink_dump: Path, swaks_path: str
) -> None:
    verified_domain(dns_server)
    cert = smtp_server.data_dir / "tls" / "smtp-cert.pem"
    starttls, implicit_tls = (
        listener(smtp_server, "starttls_listen"),
        listener(smtp_server, "tls_listen"),
    )
    wait_for_smtp(starttls)
    wait_for_smtp(implicit_tls)
    token = smtp_server.create_key("relay", permission="sending_access")

    ids = {
        "swaks STARTTLS": swaks(swaks_path, starttls, token, cert, "swaks STARTTLS", "--tls"),
        "swaks implicit TLS": swaks(
            swaks_path, implicit_tls, token, cert, "swaks implicit TLS", "--tls-on-connect"
        ),
        "smtplib": with_smtplib(starttls, token, cert, "smtplib"),
    }

    # Delivered first: smtp-sink has written a message out by the time it answers its DATA.
    for email_id in ids.values():
        wait_until(lambda i=email_id: resend.Emails.get(i)["last_event"] == "delivered", "sent")
    sunk = sunk_messages(sink_dump)
    assert len(sunk) == 3
    by_subject = {}
    for message in sunk:
        subject = re.search(rb"^Subject: (.+?)\r$", message.content, re.MULTILINE)
        assert subject is not None
        by_subject[subject.group(1).decode()] = message
    assert sorted(by_subject) == sorted(ids)
    for subject, message in by_subject.items():
        assert dkim_verifies(message.content, dns_server), subject
        email_id = ids[subject]
        verp = parse_verp(message.mail_from)
        assert verp is not None and (verp.email_id, verp.host) == (email_id, f"send.{DOMAIN}")
    assert sorted(by_subject["smtplib"].rcpt_tos) == ["ann@example.org", "bob@example.org"]

    # SMTP mail shows in the API like API mail.
    listed = {email["id"]: email for email in resend.Emails.list()["data"]}
    for subject, email_id in ids.items():
        assert listed[email_id]["subject"] == subject
        assert listed[email_id]["from"] == f"Shop <shop@{DOMAIN}>"
