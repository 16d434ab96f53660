"""Crafted emails scanned by a real rspamd (Debian's package, offline: no block lists, no DNS)
through `scan_message`: its verdict and heaviest symbols become insights a sender can act on,
and an rspamd that is down or silent becomes `rspamd_unavailable`, never an error."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.config import Config, InsightsConfig
from postwire.insights.model import Insight
from postwire.insights.rspamd import scan_message
from postwire.insights.rspamd_symbols import SYMBOL_EXPLANATIONS
from tests.dns_server import AuthoritativeDnsServer
from tests.peers import require_peer
from tests.rspamd_server import RspamdServer, rspamd_binary, running_rspamd

SENDER = "billing@acme.example"
RECIPIENT = "bob@example.org"


@pytest.fixture(scope="module")
def rspamd() -> Iterator[RspamdServer]:
    require_peer(rspamd_binary(), "rspamd", "rspamd")
    with running_rspamd() as server:
        yield server


def config_for(url: str, tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path, insights=InsightsConfig(rspamd_url=url))


def clean_message() -> bytes:
    message = EmailMessage()
    message["From"] = f"Acme Billing <{SENDER}>"
    message["To"] = RECIPIENT
    message["Subject"] = "Your November invoice"
    message["Date"] = formatdate()
    message["Message-ID"] = make_msgid(domain="acme.example")
    text = "Hello Bob,\n\nyour invoice for November is ready in your account.\n\nThanks,\nAcme\n"
    message.set_content(text)
    message.add_alternative(
        "<html><body><p>Hello Bob,</p><p>your invoice for November is ready in your account."
        "</p><p>Thanks,<br>Acme</p></body></html>",
        subtype="html",
    )
    return message.as_bytes()


def spammy_message() -> bytes:
    """HTML only, a shortener link, a subject in capitals, no Message-ID and no Date."""
    message = EmailMessage()
    message["From"] = f"Acme Billing <{SENDER}>"
    message["To"] = RECIPIENT
    message["Subject"] = "ACT NOW: YOUR PRIZE IS WAITING"
    message.set_content(
        '<html><body><p>You won!</p><a href="https://bit.ly/3xYzAbc">Claim it</a></body></html>',
        subtype="html",
    )
    return message.as_bytes()


async def scan(config: Config, message: bytes, **kwargs: object) -> list[Insight]:
    return await scan_message(
        config,
        message,
        sender=SENDER,
        recipients=[RECIPIENT],
        helo="mail.acme.example",
        client_ip="127.0.0.1",
        queue_id="em_test",
        **kwargs,  # type: ignore[arg-type]
    )


def summary_score(insights: list[Insight]) -> float:
    summary = insights[0]
    assert summary.code == "rspamd_score"
    match = re.fullmatch(r"rspamd scored (-?[\d.]+) of ([\d.]+) \((.+)\)", summary.message)
    assert match, summary.message
    return float(match[1])


def symbol_names(insights: list[Insight]) -> list[str]:
    return [i.message.split(" ")[0] for i in insights if i.code == "rspamd_symbol"]


async def test_a_spammy_email_scores_worse_than_a_clean_one(
    rspamd: RspamdServer, tmp_path: Path
) -> None:
    config = config_for(rspamd.url, tmp_path)
    clean = await scan(config, clean_message())
    spammy = await scan(config, spammy_message())

    assert clean[0].severity == "ok", clean
    assert summary_score(spammy) > summary_score(clean) + 3
    assert spammy[0].severity in ("info", "warning"), spammy[0]
    assert spammy[0].fix

    # The heaviest symbols, each explained in plain words with what to do.
    names = symbol_names(spammy)
    assert {"MISSING_MID", "SUBJ_ALL_CAPS", "MIME_HTML_ONLY"} <= set(names), spammy
    assert len(names) <= 5
    for insight in spammy[1:]:
        name = insight.message.split(" ")[0]
        if name in SYMBOL_EXPLANATIONS:
            assert insight.message.endswith(SYMBOL_EXPLANATIONS[name].meaning)
            assert insight.fix == SYMBOL_EXPLANATIONS[name].fix
    missing_mid = next(i for i in spammy if i.message.startswith("MISSING_MID"))
    assert missing_mid.severity == "warning"
    assert missing_mid.message == "MISSING_MID (+2.5): The email has no Message-ID header."
    assert "MISSING_MID" not in symbol_names(clean)


async def test_a_dangerous_attachment_is_named(rspamd: RspamdServer, tmp_path: Path) -> None:
    message = EmailMessage()
    message["From"] = SENDER
    message["To"] = RECIPIENT
    message["Subject"] = "Your November invoice"
    message["Date"] = formatdate()
    message["Message-ID"] = make_msgid(domain="acme.example")
    message.set_content("The invoice is attached.\n")
    message.add_attachment(
        b"MZ\x90\x00" * 100,
        maintype="application",
        subtype="octet-stream",
        filename="invoice.pdf.exe",
    )
    insights = await scan(config_for(rspamd.url, tmp_path), message.as_bytes())
    double = next(i for i in insights if i.message.startswith("MIME_DOUBLE_BAD_EXTENSION"))
    assert double.severity == "warning"
    assert "two extensions" in double.message


async def test_rspamd_down_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    insights = await scan(config_for(f"http://127.0.0.1:{port}", tmp_path), clean_message())
    assert [(i.code, i.severity) for i in insights] == [("rspamd_unavailable", "info")]
    assert "cannot connect" in insights[0].message
    assert insights[0].fix


async def test_a_silent_rspamd_is_given_up_on(tmp_path: Path) -> None:
    """A listener that accepts the connection and never answers: the scan ends at its
    deadline with `rspamd_unavailable`."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    with listener:
        with trio.fail_after(10):
            insights = await scan(
                config_for(f"http://127.0.0.1:{port}", tmp_path), clean_message(), timeout=0.5
            )
    assert [i.code for i in insights] == ["rspamd_unavailable"]
    assert "no answer within 0.5 s" in insights[0].message


async def test_a_wrong_url_is_unavailable(rspamd: RspamdServer, tmp_path: Path) -> None:
    """An rspamd_url with a path rspamd does not serve: its refusal is no verdict."""
    insights = await scan(config_for(f"{rspamd.url}/nothing-here", tmp_path), clean_message())
    assert [i.code for i in insights] == ["rspamd_unavailable"]
    assert insights[0].message.endswith("rspamd answered HTTP 500: invalid command")


def signed(message: bytes, signer: _core.DkimSigner) -> bytes:
    crlf = message.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    return signer.sign(crlf) + crlf


async def test_rspamd_checks_postwires_signature_against_dns(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    """With DNS (Knot) to ask, rspamd verifies a signature of Postwire's signer against the
    published key, as a receiver would: a good one lowers the score and shows as ok, a message
    changed after signing is named as a DKIM failure with what to do."""
    require_peer(rspamd_binary(), "rspamd", "rspamd")
    key = _core.generate_dkim_key("rsa")
    signer = _core.DkimSigner(key.private_key_pem, "acme.test", "pw1")
    dns_server.publish("pw1._domainkey.acme.test", "TXT", key.dns_txt)
    dns_server.publish("_dmarc.acme.test", "TXT", "v=DMARC1; p=reject")
    good = signed(clean_message().replace(b"acme.example", b"acme.test"), signer)
    tampered = good.replace(b"your invoice for November", b"your invoice for December")

    with running_rspamd(nameserver=dns_server.nameserver) as rspamd:
        config = config_for(rspamd.url, tmp_path)
        verified = await scan_message(
            config, good, sender="billing@acme.test", recipients=[RECIPIENT]
        )
        broken = await scan_message(
            config, tampered, sender="billing@acme.test", recipients=[RECIPIENT]
        )

    allow = next(i for i in verified if i.message.startswith("R_DKIM_ALLOW"))
    assert (allow.severity, allow.fix) == ("ok", "")
    assert "R_DKIM_REJECT" not in symbol_names(verified)
    reject = next(i for i in broken if i.message.startswith("R_DKIM_REJECT"))
    assert reject.severity == "warning"
    assert reject.fix == SYMBOL_EXPLANATIONS["R_DKIM_REJECT"].fix
    assert summary_score(broken) > summary_score(verified)
