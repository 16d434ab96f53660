"""SMTP submission on loopback: real clients (smtplib, swaks) against `serve_submission`, the
accepted mail in the spool, and its spooled bytes verified with dkimpy."""

from __future__ import annotations

import base64
import dataclasses
import email
import email.policy
import json
import logging
import re
import smtplib
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from pathlib import Path
from typing import Any, TypeVar

import dkim
import pytest
import trio

from postwire import _core
from postwire.config import Config, load_config
from postwire.domains import store as domain_store
from postwire.services import ServiceDeps
from postwire.smtp import submission
from postwire.smtp.submission import SubmissionListeners, serve_submission
from postwire.smtp.submission_policy import AUTH_SOURCE_CEILING_FACTOR, BARE_LF
from postwire.store.accounts import create_api_key, create_team
from postwire.store.deliveries import email_events, list_suppressions
from postwire.store.emails import EMAILS
from postwire.store.spool import TABLES, Spool
from tests.ports import free_port

ResultT = TypeVar("ResultT")


@dataclass
class Submission:
    spool: Spool
    team_id: str
    token: str
    domain: domain_store.DomainRecord
    listeners: SubmissionListeners
    cert: Path

    @property
    def starttls(self) -> tuple[str, int]:
        return self.listeners.starttls[0]

    @property
    def implicit_tls(self) -> tuple[str, int]:
        return self.listeners.tls[0]

    def client_tls(self) -> ssl.SSLContext:
        # The self-signed certificate generated on first start, trusted as its own CA.
        return ssl.create_default_context(cafile=str(self.cert))

    def records(self) -> list[Any]:
        return [record for _, record in EMAILS.scan(self.spool, prefix=f"{self.team_id}/")]


def submission_config(tmp_path: Path, **env: str) -> Config:
    return load_config(
        None,
        {
            "POSTWIRE_DATA_DIR": str(tmp_path),
            "POSTWIRE_SMTP_STARTTLS_LISTEN": json.dumps([f"127.0.0.1:{free_port()}"]),
            "POSTWIRE_SMTP_TLS_LISTEN": json.dumps([f"127.0.0.1:{free_port()}"]),
            "POSTWIRE_DELIVERY_HELO_NAME": "mx.postwire.test",
            **env,
        },
    )


@asynccontextmanager
async def submission_server(tmp_path: Path, **env: str) -> AsyncIterator[Submission]:
    config = submission_config(tmp_path, **env)
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    now = datetime.now(UTC)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        team = await create_team(spool, "Shop", now)
        _, token = await create_api_key(spool, team.id, "smtp", "full_access", None, now)
        domain = await domain_store.create_domain(spool, config, team.id, "sender.test")
        domain = dataclasses.replace(domain, status="verified")
        batch = _core.WriteBatch()
        domain_store.DOMAINS.put(batch, f"domain/{team.id}/{domain.id}", domain)
        await spool.commit(batch)
        deps = ServiceDeps(spool=spool)
        with trio.fail_after(20):  # the service stops by itself once `stopping` is set
            async with trio.open_nursery() as service:
                listeners: SubmissionListeners = await service.start(serve_submission, config, deps)
                cert = tmp_path / "tls" / "smtp-cert.pem"
                yield Submission(spool, team.id, token, domain, listeners, cert)
                deps.stopping.set()
        nursery.cancel_scope.cancel()
    await spool.close()


def message(
    sender: str = "Shop <shop@sender.test>", to: str = "ann@example.org", **headers: str
) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = to
    mail["Subject"] = "Order 1"
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content("Thanks for your order.\n")
    return mail


async def in_thread(fn: Callable[[], ResultT]) -> ResultT:
    return await trio.to_thread.run_sync(fn)


def verifies_with_dkimpy(spooled: bytes, domain: domain_store.DomainRecord) -> bool:
    txt = domain.dkim_dns_txt.encode()
    return bool(dkim.verify(spooled, dnsfunc=lambda name, timeout=5: txt))


def email_id_of(reply: bytes) -> str:
    assert reply.startswith(b"2.0.0 OK queued as "), reply
    return reply.decode().rsplit(" ", 1)[1]


async def test_starttls_auth_plain_accepts_signs_and_spools(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        mail = message(
            Bcc="hidden@example.org",
            X_Entity_Ref_ID="ref-1",
            Resend_Idempotency_Key="order-1",
        )

        def send() -> tuple[int, bytes]:
            with smtplib.SMTP(*server.starttls, timeout=10) as client:
                client.starttls(context=server.client_tls())
                client.login("postwire", server.token)  # smtplib picks PLAIN
                client.mail("anything@sender.test")
                client.rcpt("ann@example.org")
                client.rcpt("hidden@example.org")
                return client.data(mail.as_bytes(policy=SMTP))

        code, reply = await in_thread(send)
        assert code == 250
        email_id = email_id_of(reply)
        (record,) = server.records()
        assert record.id == email_id
        assert record.recipients == ["ann@example.org", "hidden@example.org"]
        assert record.bcc == ["hidden@example.org"]
        assert record.subject == "Order 1"
        assert record.last_event == "queued"
        spooled = server.spool.message_body(email_id)
        assert spooled is not None
        assert verifies_with_dkimpy(spooled, server.domain)
        head = spooled.split(b"\r\n\r\n", 1)[0]
        assert b"\r\nBcc:" not in head and b"Idempotency-Key" not in head
        assert b"\r\nX-Entity-Ref-ID: ref-1" in head, "custom headers are kept"

        # The same message with the same idempotency key is accepted once.
        code, reply = await in_thread(send)
        assert code == 250 and email_id_of(reply) == email_id
        assert len(server.records()) == 1


async def test_implicit_tls_auth_login_accepts(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def send() -> tuple[int, bytes]:
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                client.ehlo()
                assert "starttls" not in client.esmtp_features
                client.user, client.password = "postwire", server.token
                client.auth("LOGIN", client.auth_login)
                client.mail("shop@sender.test")
                client.rcpt("ann@example.org")
                return client.data(message().as_bytes(policy=SMTP))

        code, reply = await in_thread(send)
        assert code == 250
        spooled = server.spool.message_body(email_id_of(reply))
        assert spooled is not None and verifies_with_dkimpy(spooled, server.domain)


async def test_ehlo_offers_exactly_these_extensions(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def ehlo_replies() -> list[tuple[int, bytes]]:
            with smtplib.SMTP(*server.starttls, timeout=10) as client:
                replies = [client.ehlo()]
                client.starttls(context=server.client_tls())
                replies += [client.ehlo(), client.docmd("AUTH", "failures")]
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                replies.append(client.ehlo())
            return replies

        plain, after_starttls, bogus, implicit_tls = await in_thread(ehlo_replies)
        size = b"SIZE 41943040"
        assert plain == (
            250,
            b"\n".join([b"mx.postwire.test", size, b"8BITMIME", b"STARTTLS", b"HELP"]),
        )
        with_auth = b"\n".join(
            [b"mx.postwire.test", size, b"8BITMIME", b"AUTH LOGIN PLAIN", b"HELP"]
        )
        assert after_starttls == implicit_tls == (250, with_auth)
        # No attribute of the handler is a mechanism.
        assert bogus == (504, b"5.5.4 Unrecognized authentication type")


async def test_auth_uses_no_deprecated_aiosmtpd_interface(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with submission_server(tmp_path) as server:
        raw = message().as_bytes(policy=SMTP)
        code, _ = await in_thread(lambda: send_raw(server, raw, ["ann@example.org"]))
        assert code == 250
    deprecated = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert deprecated == []


def received_of(spooled: bytes) -> bytes:
    """The message's first field after its DKIM signature, which must be its trace."""
    fields = re.split(rb"\r\n(?![ \t])", spooled.split(b"\r\n\r\n", 1)[0])
    assert fields[0].startswith(b"DKIM-Signature:"), fields[0]
    assert sum(f.lower().startswith(b"received:") for f in fields) == 1
    return fields[1]


async def test_received_field_traces_the_submission(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def send(helo: bytes, implicit_tls: bool) -> tuple[int, bytes]:
            if implicit_tls:
                client = smtplib.SMTP_SSL(
                    *server.implicit_tls, context=server.client_tls(), timeout=10
                )
            else:
                client = smtplib.SMTP(*server.starttls, timeout=10)
                client.starttls(context=server.client_tls())
            with client:
                client.send(b"EHLO " + helo + b"\r\n")  # raw: the HELO is the client's own
                client.ehlo_resp = client.getreply()[1]
                plain = base64.b64encode(f"\0postwire\0{server.token}".encode()).decode()
                assert client.docmd("AUTH", f"PLAIN {plain}")[0] == 235
                client.mail("shop@sender.test")
                client.rcpt("ann@example.org")
                return client.data(message().as_bytes(policy=SMTP))

        tls = rb"\(using TLSv1\.3 with cipher TLS_[A-Z0-9_]+ \(\d+ bits\)\)"
        date = rb"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d \+0000"
        for helo, implicit_tls, shown in [
            (b"client.example", False, rb"from client\.example \(\[127\.0\.0\.1\]\)"),
            (b"[127.0.0.1]", True, rb"from \[127\.0\.0\.1\] \(\[127\.0\.0\.1\]\)"),
            # A HELO that would end the comment, or the field, is no name: a comment shows it.
            (
                b"evil.example\rX-Injected: yes (a\\b)",
                True,
                rb"from \[127\.0\.0\.1\] \(helo=evil\.example\?X-Injected:\?yes\?\?a\?b\?\)",
            ),
        ]:
            code, reply = await in_thread(lambda h=helo, i=implicit_tls: send(h, i))
            assert code == 250, reply
            email_id = email_id_of(reply)
            spooled = server.spool.message_body(email_id)
            assert spooled is not None and verifies_with_dkimpy(spooled, server.domain)
            expected = (
                b"Received: " + shown + b"\r\n\t" + tls + b"\r\n\tby mx\\.postwire\\.test "
                b"\\(Postwire\\) with ESMTPSA id " + email_id.encode() + b";\r\n\t" + date
            )
            received = received_of(spooled)
            assert re.fullmatch(expected, received), received
            assert server.token.encode() not in spooled and b"X-Injected" not in spooled.replace(
                received, b""
            )


async def test_mail_and_auth_before_starttls_need_tls(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def attempt() -> list[tuple[int, bytes]]:
            with smtplib.SMTP(*server.starttls, timeout=10) as client:
                client.ehlo()
                assert "auth" not in client.esmtp_features, "AUTH is offered only over TLS"
                assert "starttls" in client.esmtp_features
                plain = base64.b64encode(f"\0postwire\0{server.token}".encode()).decode()
                return [client.docmd("AUTH", f"PLAIN {plain}"), client.mail("shop@sender.test")]

        for code, reply in await in_thread(attempt):
            assert (code, reply[:6]) == (530, b"5.7.0 ")
        assert server.records() == []


async def test_wrong_key_or_username_is_535(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def login(username: str, password: str) -> tuple[int, bytes]:
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                try:
                    client.login(username, password)
                except smtplib.SMTPAuthenticationError as refusal:
                    return refusal.smtp_code, refusal.smtp_error
                return 235, b""

        wrong_key = "re_" + "x" * 8 + "_" + "y" * 24
        for username, password in [("postwire", wrong_key), ("resend", server.token)]:
            code, reply = await in_thread(lambda u=username, p=password: login(u, p))
            assert (code, reply[:6]) == (535, b"5.7.8 ")


def send_raw(server: Submission, raw: bytes, recipients: list[str]) -> tuple[int, bytes]:
    """Log in over implicit TLS and send `raw`; the reply to DATA."""
    with smtplib.SMTP_SSL(*server.implicit_tls, context=server.client_tls(), timeout=10) as client:
        client.login("postwire", server.token)
        client.mail("shop@sender.test")
        for recipient in recipients:
            client.rcpt(recipient)
        return client.data(raw)


def refused_reply(server: Submission, send: Callable[[smtplib.SMTP], Any]) -> tuple[int, bytes]:
    """Log in over implicit TLS, run `send`, and return the refusal it raised."""
    with smtplib.SMTP_SSL(*server.implicit_tls, context=server.client_tls(), timeout=10) as client:
        client.login("postwire", server.token)
        try:
            send(client)
        except smtplib.SMTPResponseException as refusal:
            return refusal.smtp_code, refusal.smtp_error
        except smtplib.SMTPRecipientsRefused as refusal:
            ((code, reply),) = set(refusal.recipients.values())
            return code, reply
        raise AssertionError("the server accepted")


async def test_unverified_from_domain_is_550_5_7_1(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        mail = message(sender="someone@elsewhere.test")
        code, reply = await in_thread(lambda: refused_reply(server, lambda c: c.send_message(mail)))
        assert (code, reply[:6]) == (550, b"5.7.1 ")
        assert b"elsewhere.test" in reply
        assert server.records() == []


async def test_a_sender_header_is_checked_like_from(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        for sender, expected in [
            ("someone@elsewhere.test", (550, b"5.7.1 ")),  # not a verified domain of the team
            ("a@sender.test, b@sender.test", (550, b"5.6.0 ")),  # Sender is one mailbox
        ]:
            mail = message(Sender=sender)
            code, reply = await in_thread(
                lambda m=mail: refused_reply(server, lambda c: c.send_message(m))
            )
            assert (code, reply[:6]) == expected, reply
        assert server.records() == []
        mail = message(Sender="Desk <desk@mail.sender.test>")  # under the verified domain
        code, _ = await in_thread(
            lambda: send_raw(server, mail.as_bytes(policy=SMTP), ["ann@example.org"])
        )
        assert code == 250


async def test_recipients_follow_the_rest_apis_address_rules(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def rcpt_replies() -> list[tuple[str, int, bytes]]:
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                client.login("postwire", server.token)
                client.mail("shop@sender.test")
                replies = []
                for path in NOT_RECIPIENTS:
                    code, reply = client.docmd(f"RCPT TO:{path}")
                    replies.append((path, code, reply))
                assert client.rcpt("ann@example.org")[0] == 250
                # Only the one recipient goes: the refused ones are in no transaction.
                data_code, _ = client.data(message().as_bytes(policy=SMTP))
                assert data_code == 250
            return replies

        for path, code, reply in await in_thread(rcpt_replies):
            assert (code, reply[:6]) == (501, b"5.1.3 "), (path, reply)
        (record,) = server.records()
        assert record.recipients == ["ann@example.org"]


NOT_RECIPIENTS = [
    "<>",
    "<not an address>",
    "<x@y>",
    "<x@localhost>",
    "<x@a.localhost>",
    "<x@[127.0.0.1]>",
    "<x@[IPv6:::1]>",
    "<x@printer.local>",
    "<x@db.internal>",
    '<"two words"@example.org>',
]


async def test_relay_without_auth_is_denied(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def relay() -> tuple[int, bytes]:
            with smtplib.SMTP(*server.starttls, timeout=10) as client:
                client.starttls(context=server.client_tls())
                client.ehlo()
                assert client.mail("shop@sender.test")[0] == 250
                return client.rcpt("victim@example.org")

        assert await in_thread(relay) == (550, b"5.7.1 relaying denied")


# The tricks of open-relay testers: other domains hidden in local parts, source routes, and
# look-alikes of Postwire's own return-path addresses.
RELAY_ATTEMPTS = [
    "victim@example.org",
    "victim%example.org@send.sender.test",
    '"victim@example.org"@send.sender.test',
    "victim@example.org@send.sender.test",
    "@send.sender.test:victim@example.org",
    "victim!example.org@send.sender.test",
    "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test.example.org",
    "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@sender.test",
    "bounces+victim@send.sender.test",
    "complaints@sender.test",
    "complaints+victim@send.sender.test",
    "postmaster@example.org",
]


async def test_open_relay_tricks_are_denied(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def attempt(address: str) -> tuple[int, bytes]:
            with smtplib.SMTP(*server.starttls, timeout=10) as client:
                client.starttls(context=server.client_tls())
                client.ehlo()
                assert client.mail("spammer@example.net")[0] == 250
                code, reply = client.rcpt(address)
                if code == 250:  # accepted: would the message go anywhere?
                    code, reply = client.data(message(to=address).as_bytes(policy=SMTP))
                return code, reply

        for address in RELAY_ATTEMPTS:
            code, reply = await in_thread(lambda a=address: attempt(a))
            refusals = {(550, b"5.7.1 "), (553, b"5.1.3 "), (501, b"5.1.3 ")}
            assert (code, reply[:6]) in refusals, (address, reply)
        assert server.spool.scan("emails", limit=10) == []


TRUSTED_LOOPBACK = {"POSTWIRE_SMTP_TRUSTED_NETWORKS": '["127.0.0.0/8"]'}


def trusted_relay(server: Submission, sender: str) -> tuple[int, bytes]:
    """A bulk relay's message from `sender`, without AUTH; the reply to DATA."""
    with smtplib.SMTP(*server.starttls, timeout=10) as client:
        client.starttls(context=server.client_tls())
        client.ehlo()
        client.mail("bulk@sender.test")
        client.rcpt("ann@example.org")
        return client.data(message(sender=sender).as_bytes(policy=SMTP))


async def test_trusted_network_relays_without_auth_for_the_domains_team(tmp_path: Path) -> None:
    async with submission_server(tmp_path, **TRUSTED_LOOPBACK) as server:
        code, reply = await in_thread(lambda: trusted_relay(server, "news@sender.test"))
        assert code == 250
        (record,) = server.records()
        assert record.id == email_id_of(reply) and record.team_id == server.team_id
        code, reply = await in_thread(lambda: trusted_relay(server, "news@elsewhere.test"))
        assert (code, reply[:6]) == (550, b"5.7.1 ")


async def test_trusted_relay_mail_of_a_domain_two_teams_verified_belongs_to_neither(
    tmp_path: Path,
) -> None:
    async with submission_server(tmp_path, **TRUSTED_LOOPBACK) as server:
        # A subdomain's address is covered by the verified domain.
        code, reply = await in_thread(lambda: trusted_relay(server, "news@mail.sender.test"))
        assert code == 250, reply
        # Another team verified the same name (each proved it controls the DNS at some time),
        # in a spool from before a name belonged to one team at a time.
        other = await create_team(server.spool, "Other", datetime.now(UTC))
        twin = dataclasses.replace(server.domain, id=_core.new_id(), team_id=other.id)
        batch = _core.WriteBatch()
        domain_store.DOMAINS.put(batch, f"domain/{other.id}/{twin.id}", twin)
        await server.spool.commit(batch)
        await trio.sleep(1.1)  # the relay path reads the verified domains once a second
        code, reply = await in_thread(lambda: trusted_relay(server, "news@sender.test"))
        assert (code, reply[:6]) == (550, b"5.7.1 ")
        assert len(server.records()) == 1


async def test_a_message_without_subject_is_accepted(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        mail = message()
        del mail["Subject"]
        code, reply = await in_thread(
            lambda: send_raw(server, mail.as_bytes(policy=SMTP), ["ann@example.org"])
        )
        assert code == 250
        (record,) = server.records()
        assert record.id == email_id_of(reply) and record.subject == ""
        spooled = server.spool.message_body(record.id)
        assert spooled is not None and verifies_with_dkimpy(spooled, server.domain)
        assert b"\r\nSubject:" not in b"\r\n" + spooled.split(b"\r\n\r\n", 1)[0]


async def test_oversize_is_552_5_3_4(tmp_path: Path) -> None:
    async with submission_server(tmp_path, POSTWIRE_SMTP_MAX_MESSAGE_SIZE="20000") as server:
        big = message().as_bytes(policy=SMTP) + (b"y" * 900 + b"\r\n") * 30

        def declared(client: smtplib.SMTP) -> None:
            assert client.has_extn("size") and client.esmtp_features["size"] == "20000"
            code, reply = client.mail("shop@sender.test", ["SIZE=30000"])
            raise smtplib.SMTPResponseException(code, reply)

        def undeclared(client: smtplib.SMTP) -> None:
            client.mail("shop@sender.test")
            client.rcpt("ann@example.org")
            code, reply = client.data(big)
            raise smtplib.SMTPResponseException(code, reply)

        for send in (declared, undeclared):
            code, reply = await in_thread(lambda s=send: refused_reply(server, s))
            assert (code, reply[:6]) == (552, b"5.3.4 ")
        assert server.records() == []


async def test_at_most_50_recipients(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def many(client: smtplib.SMTP) -> None:
            client.mail("shop@sender.test")
            for n in range(50):
                assert client.rcpt(f"r{n}@example.org")[0] == 250
            code, reply = client.rcpt("r50@example.org")
            raise smtplib.SMTPResponseException(code, reply)

        code, reply = await in_thread(lambda: refused_reply(server, many))
        assert (code, reply[:6]) == (452, b"4.5.3 ")


async def test_line_over_1000_octets_is_500_5_5_2(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        raw = message().as_bytes(policy=SMTP) + b"z" * 1500 + b"\r\n"

        def long_line(client: smtplib.SMTP) -> None:
            client.mail("shop@sender.test")
            client.rcpt("ann@example.org")
            code, reply = client.data(raw)
            raise smtplib.SMTPResponseException(code, reply)

        code, reply = await in_thread(lambda: refused_reply(server, long_line))
        assert (code, reply[:6]) == (500, b"5.5.2 ")
        assert server.records() == []


async def test_bare_lf_is_refused_not_guessed_at(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        # smtplib sends bytes as they are: these lines end with bare LF.
        short = message().as_bytes()
        assert b"\r\n" not in short
        # Longer than a line: what reading to CRLF makes of it is one overlong line.
        long = message().as_bytes() + b"More text.\n" * 100

        def send_raw(raw: bytes) -> Callable[[smtplib.SMTP], None]:
            def send(client: smtplib.SMTP) -> None:
                client.mail("shop@sender.test")
                client.rcpt("ann@example.org")
                code, reply = client.data(raw)
                raise smtplib.SMTPResponseException(code, reply)

            return send

        code, reply = await in_thread(lambda: refused_reply(server, send_raw(short)))
        assert (code, reply) == (550, b"5.5.2 " + BARE_LF[2].encode())
        code, reply = await in_thread(lambda: refused_reply(server, send_raw(long)))
        assert (code, reply[:6]) == (500, b"5.5.2 ") and b"bare LF" in reply
        assert server.records() == []


# The end-of-data look-alikes of SMTP smuggling: a server downstream that took one for the
# end of the data would read the next lines as a second transaction.
SMUGGLED_ENDINGS = [
    b"\r.\r", b"\n.\n", b"\r\n.\n", b"\n.\r\n", b"\r.\r\n", b"\r\n.\r", b"\n.\r", b"\r.\n",
]  # fmt: skip
SMUGGLED = (
    b"MAIL FROM:<shop@sender.test>\r\nRCPT TO:<victim@example.org>\r\nDATA\r\n"
    b"From: Shop <shop@sender.test>\r\nTo: victim@example.org\r\nSubject: smuggled\r\n\r\n"
    b"smuggled\r\n"
)


async def test_smtp_smuggling_endings_are_refused_and_nothing_is_relayed(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        head = message().as_bytes(policy=SMTP)

        def smuggle() -> list[tuple[bytes, int, bytes, tuple[int, bytes]]]:
            """Each ending in a transaction of its own, sent as raw octets (smtplib's `data`
            would stuff a dot after a bare LF); the reply to the data and then to a NOOP."""
            replies = []
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                client.login("postwire", server.token)
                for ending in SMUGGLED_ENDINGS:
                    client.mail("shop@sender.test")
                    client.rcpt("ann@example.org")
                    assert client.docmd("DATA")[0] == 354
                    assert client.sock is not None
                    client.sock.sendall(head + b"Hello" + ending + SMUGGLED + b"\r\n.\r\n")
                    code, reply = client.getreply()
                    # Had the server taken the ending for one, its replies to the smuggled
                    # commands would come before the NOOP's.
                    replies.append((ending, code, reply, client.noop()))
            return replies

        for ending, code, reply, after in await in_thread(smuggle):
            assert (code, reply[:6]) == (550, b"5.5.2 "), ending
            assert b"bare" in reply and b"RFC 5321 2.3.8" in reply
            assert after == (250, b"OK"), ending
        assert server.records() == []
        assert server.spool.scan("emails", limit=10) == []


async def test_disconnect_mid_data_leaves_nothing(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def half_message() -> None:
            client = smtplib.SMTP_SSL(*server.implicit_tls, context=server.client_tls(), timeout=10)
            client.login("postwire", server.token)
            client.mail("shop@sender.test")
            client.rcpt("ann@example.org")
            assert client.docmd("DATA")[0] == 354
            assert client.sock is not None
            client.sock.sendall(message().as_bytes()[:200])
            client.close()  # no final dot

        await in_thread(half_message)
        await trio.sleep(0.3)
        assert server.records() == []
        assert server.spool.scan("emails", limit=10) == []


@pytest.mark.parametrize("implicit_tls", [False, True], ids=["starttls", "implicit-tls"])
async def test_swaks_submits(tmp_path: Path, implicit_tls: bool, swaks_path: str) -> None:
    async with submission_server(tmp_path) as server:
        host, port = server.implicit_tls if implicit_tls else server.starttls
        command = [
            swaks_path, "--server", f"{host}:{port}", "--from", "shop@sender.test",
            "--to", "ann@example.org", "--header", "From: Shop <shop@sender.test>",
            "--header", "Subject: swaks", "--auth", "PLAIN", "--auth-user", "postwire",
            "--auth-password", server.token, "--tls-verify", "--tls-ca-path", str(server.cert),
            "--tls-on-connect" if implicit_tls else "--tls",
        ]  # fmt: skip
        result = await trio.run_process(command, capture_stdout=True, capture_stderr=True)
        output = result.stdout.decode()
        accepted = re.search(r"^<[-~]  250 2\.0\.0 OK queued as (\S+)$", output, re.MULTILINE)
        assert accepted is not None, output
        email_id = accepted.group(1)
        spooled = server.spool.message_body(email_id)
        assert spooled is not None and verifies_with_dkimpy(spooled, server.domain)


@asynccontextmanager
async def another_process(server: Submission, tmp_path: Path, **env: str) -> AsyncIterator[Any]:
    """A second submission service on the same spool, as another process of the service is:
    its own handler and listeners, nothing shared but the store. Yields its listeners."""
    config = submission_config(tmp_path, **env)
    deps = ServiceDeps(spool=server.spool)
    async with trio.open_nursery() as nursery:
        yield await nursery.start(serve_submission, config, deps)
        deps.stopping.set()


def auth_attempts(server: Submission, address: tuple[str, int], passwords: list[str]) -> list[int]:
    """The reply codes of AUTH PLAIN with each password in turn, in one session."""
    with smtplib.SMTP_SSL(*address, context=server.client_tls(), timeout=10) as client:
        client.ehlo()
        codes = []
        for password in passwords:
            plain = base64.b64encode(f"\0postwire\0{password}".encode()).decode()
            code, _ = client.docmd("AUTH", f"PLAIN {plain}")
            codes.append(code)
            if code == 235:
                break
        return codes


# Failures are counted per minute: the tests' minute does not roll over.
A_MINUTE_START_MS = 1_700_000_040_000


async def test_failed_auth_locks_the_key_guessed_at_from_that_address_in_every_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submission, "_now_ms", lambda: A_MINUTE_START_MS)
    limit = {"POSTWIRE_SMTP_MAX_AUTH_FAILURES": "3"}
    async with (
        submission_server(tmp_path, **limit) as server,
        another_process(server, tmp_path, **limit) as other,
    ):
        first, second = server.implicit_tls, other.tls[0]
        # The right key's lookup part with a wrong secret: someone guessing at that key.
        guess = server.token[:12] + "g" * 24
        assert await in_thread(lambda: auth_attempts(server, first, [guess, guess])) == [
            535,
            535,
        ]
        assert await in_thread(lambda: auth_attempts(server, second, [guess])) == [535]
        # Three failures in all: that key is locked from this address in both processes,
        # its right secret included, until the minute is over.
        for address in (first, second):
            codes = await in_thread(lambda a=address: auth_attempts(server, a, [guess]))
            assert codes == [454]
            codes = await in_thread(lambda a=address: auth_attempts(server, a, [server.token]))
            assert codes == [454]
        # Another key used from the same address (behind the same NAT) still gets in.
        _, colleague = await create_api_key(
            server.spool, server.team_id, "colleague", "full_access", None, datetime.now(UTC)
        )
        assert await in_thread(lambda: auth_attempts(server, second, [colleague])) == [235]


async def test_spraying_keys_from_one_address_meets_its_ceiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submission, "_now_ms", lambda: A_MINUTE_START_MS)
    async with submission_server(tmp_path, POSTWIRE_SMTP_MAX_AUTH_FAILURES="2") as server:
        ceiling = 2 * AUTH_SOURCE_CEILING_FACTOR
        sprayed = [f"re_{n:08d}_" + "y" * 24 for n in range(ceiling)]  # a key each
        codes = await in_thread(lambda: auth_attempts(server, server.implicit_tls, sprayed))
        assert codes == [535] * ceiling
        # Every credential is refused from this address now, even a right one.
        codes = await in_thread(lambda: auth_attempts(server, server.implicit_tls, [server.token]))
        assert codes == [454]


# --- inbound reports: DSNs and feedback reports to Postwire's own addresses, without AUTH ------

INBOUND_SAMPLES = Path(__file__).parent.parent / "data" / "inbound"
SAMPLE_VERP = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test"


def sample_for(name: str, verp: str) -> bytes:
    """A stored report about the email of `verp`, with the CRLF line ends of the wire."""
    sample = (INBOUND_SAMPLES / name).read_bytes().replace(SAMPLE_VERP.encode(), verp.encode())
    return sample.replace(b"\n", b"\r\n")


def submit(server: Submission, recipients: list[str]) -> str:
    """Accept one email over SMTP with AUTH; its id."""
    raw = message(to=", ".join(recipients)).as_bytes(policy=SMTP)
    code, reply = send_raw(server, raw, recipients)
    assert code == 250, reply
    return email_id_of(reply)


def report_from_peer(
    server: Submission, rcpt_to: list[str], content: bytes
) -> list[tuple[int, bytes]]:
    """What a remote MTA does with a report: STARTTLS, no AUTH, null envelope sender."""
    with smtplib.SMTP(*server.starttls, timeout=10) as client:
        client.starttls(context=server.client_tls())
        client.ehlo()
        replies = [client.mail("<>")]
        replies += [client.rcpt(address) for address in rcpt_to]
        if all(code == 250 for code, _ in replies):
            replies.append(client.data(content))
        return replies


def the_email(server: Submission, email_id: str) -> Any:
    (record,) = [r for r in server.records() if r.id == email_id]
    return record


async def test_dsn_to_the_return_path_bounces_and_suppresses(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        email_id = await in_thread(lambda: submit(server, ["nobody@example.org"]))
        verp = the_email(server, email_id).envelope_from
        assert re.fullmatch(rf"bounces\+{email_id}-[a-z2-7]{{16}}@send\.sender\.test", verp)
        dsn = sample_for("postfix-failed.eml", verp)

        replies = await in_thread(lambda: report_from_peer(server, [verp], dsn))
        assert replies[-1] == (250, b"2.0.0 OK report received")
        assert the_email(server, email_id).last_event == "bounced"
        (event,) = email_events(server.spool, server.team_id, email_id)
        assert event.type == "email.bounced" and event.data["to"] == "nobody@example.org"
        assert event.data["bounce"]["type"] == "Permanent"
        (suppression,) = list_suppressions(server.spool, server.team_id)
        assert (suppression.email, suppression.origin) == ("nobody@example.org", "bounce")


async def test_feedback_report_to_the_complaint_address_suppresses(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        email_id = await in_thread(
            lambda: submit(server, ["angry@mailbox.example", "happy@mailbox.example"])
        )
        verp = the_email(server, email_id).envelope_from
        arf = sample_for("arf-abuse.eml", verp)

        complaints = "complaints@send.sender.test"
        replies = await in_thread(lambda: report_from_peer(server, [complaints], arf))
        assert replies[-1] == (250, b"2.0.0 OK report received")
        assert the_email(server, email_id).last_event == "complained"
        (suppression,) = list_suppressions(server.spool, server.team_id)
        assert (suppression.email, suppression.origin) == ("angry@mailbox.example", "complaint")


async def test_inbound_addresses_take_reports_only(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        email_id = await in_thread(lambda: submit(server, ["ann@example.org"]))
        verp = the_email(server, email_id).envelope_from
        other_team_verp = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.elsewhere.test"
        not_a_report = message(sender="ann@example.org", to=verp).as_bytes(policy=SMTP)

        # Not a report: refused, so the sender keeps it; nothing changes.
        replies = await in_thread(lambda: report_from_peer(server, [verp], not_a_report))
        assert (replies[-1][0], replies[-1][1][:6]) == (550, b"5.6.0 ")
        # A return path of a domain that is not Postwire's is a relay attempt.
        replies = await in_thread(lambda: report_from_peer(server, [other_team_verp], b""))
        assert replies[-1] == (550, b"5.7.1 relaying denied")
        # A report and mail to send never share a transaction, nor do reports relay.
        replies = await in_thread(
            lambda: report_from_peer(server, [verp, "victim@example.org"], b"")
        )
        assert replies[-1] == (550, b"5.7.1 relaying denied")
        assert the_email(server, email_id).last_event == "queued"
        assert email_events(server.spool, server.team_id, email_id) == []
        assert len(server.records()) == 1


async def test_trusted_relay_keeps_reports_and_mail_to_send_apart(tmp_path: Path) -> None:
    async with submission_server(tmp_path, **TRUSTED_LOOPBACK) as server:
        email_id = await in_thread(lambda: submit(server, ["ann@example.org"]))
        verp = the_email(server, email_id).envelope_from
        replies = await in_thread(
            lambda: report_from_peer(server, [verp, "victim@example.org"], b"")
        )
        assert (replies[-1][0], replies[-1][1][:6]) == (452, b"4.5.3 ")
        assert len(server.records()) == 1


async def test_protocol_errors_carry_enhanced_status_codes(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:

        def errors() -> list[tuple[int, bytes]]:
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                client.ehlo()
                return [client.docmd("FROBNICATE"), client.rcpt("ann@example.org")]

        unknown, out_of_order = await in_thread(errors)
        assert unknown == (500, b'5.5.2 Error: command "FROBNICATE" not recognized')
        assert out_of_order == (503, b"5.5.1 Error: need MAIL command")


async def test_dotted_lines_and_large_bodies_arrive_exactly(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        lines = [b".", b"..", b".starts with a dot", b"ends with a dot.", b""]
        lines += [b"%06d " % n + b"q" * 90 for n in range(1200)]  # about 115 KiB
        body = b"".join(line + b"\r\n" for line in lines)
        head = message().as_bytes(policy=SMTP).split(b"\r\n\r\n", 1)[0]
        raw = head + b"\r\n\r\n" + body  # smtplib doubles the leading dots on the wire

        code, reply = await in_thread(lambda: send_raw(server, raw, ["ann@example.org"]))
        assert code == 250, reply
        spooled = server.spool.message_body(email_id_of(reply))
        assert spooled is not None
        assert spooled.split(b"\r\n\r\n", 1)[1] == body
        assert verifies_with_dkimpy(spooled, server.domain)


async def test_html_parts_are_tracked_before_signing(tmp_path: Path) -> None:
    env = {"POSTWIRE_API_PUBLIC_URL": "https://mail.sender.test"}
    async with submission_server(tmp_path, **env) as server:
        tracked = dataclasses.replace(server.domain, open_tracking=True, click_tracking=True)
        batch = _core.WriteBatch()
        domain_store.DOMAINS.put(batch, f"domain/{server.team_id}/{tracked.id}", tracked)
        await server.spool.commit(batch)
        mail = message()
        mail.add_alternative(
            '<p>Your order: <a href="https://shop.example/o/1?a=1&amp;b=2">see it</a></p>',
            subtype="html",
        )
        raw = mail.as_bytes(policy=SMTP)

        code, reply = await in_thread(lambda: send_raw(server, raw, ["ann@example.org"]))
        assert code == 250, reply
        email_id = email_id_of(reply)
        spooled = server.spool.message_body(email_id)
        assert spooled is not None and verifies_with_dkimpy(spooled, server.domain)
        parsed = email.message_from_bytes(spooled, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        html_part, text_part = parsed.get_body(("html",)), parsed.get_body(("plain",))
        assert html_part is not None and text_part is not None
        html = str(html_part.get_content())
        assert "https://mail.sender.test/t/o/" in html, "the open pixel"
        assert 'href="https://mail.sender.test/t/c/' in html, "the link, rewritten"
        assert "shop.example" not in html
        text = str(text_part.get_content()).replace("\r\n", "\n")
        assert text == "Thanks for your order.\n", "text is left alone"


async def test_a_domain_locked_key_sends_only_from_its_domain(tmp_path: Path) -> None:
    async with submission_server(tmp_path) as server:
        config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
        other = await domain_store.create_domain(server.spool, config, server.team_id, "other.test")
        batch = _core.WriteBatch()
        other = dataclasses.replace(other, status="verified")
        domain_store.DOMAINS.put(batch, f"domain/{server.team_id}/{other.id}", other)
        await server.spool.commit(batch)
        _, locked = await create_api_key(
            server.spool, server.team_id, "locked", "sending_access", server.domain.id,
            datetime.now(UTC),
        )  # fmt: skip

        def send_as(sender: str) -> tuple[int, bytes]:
            with smtplib.SMTP_SSL(
                *server.implicit_tls, context=server.client_tls(), timeout=10
            ) as client:
                client.login("postwire", locked)
                client.mail("shop@sender.test")
                client.rcpt("ann@example.org")
                return client.data(message(sender=sender).as_bytes(policy=SMTP))

        assert (await in_thread(lambda: send_as("shop@sender.test")))[0] == 250
        code, reply = await in_thread(lambda: send_as("shop@other.test"))
        assert (code, reply[:6]) == (550, b"5.7.1 ")
        assert len(server.records()) == 1


async def test_an_idle_session_is_closed_and_a_busy_one_is_not(tmp_path: Path) -> None:
    async with submission_server(tmp_path, POSTWIRE_SMTP_IDLE_TIMEOUT_SECONDS="1") as server:

        def session() -> tuple[int, bool]:
            with smtplib.SMTP(*server.starttls, timeout=10) as client:
                client.ehlo()
                busy_replies = 0
                for _ in range(6):  # 2.4 s of commands, each well inside the timeout
                    time.sleep(0.4)
                    busy_replies += client.noop()[0] == 250
                time.sleep(2.0)
                try:
                    client.noop()
                except smtplib.SMTPServerDisconnected:
                    return busy_replies, True
                return busy_replies, False

        busy_replies, closed_when_idle = await in_thread(session)
    assert busy_replies == 6
    assert closed_when_idle
