"""A scripted SMTP receiver for tests: aiosmtpd on a loopback port, in its own thread.

Each test sets the script through `ReceiverScript`: defer the first N transactions (451 at
MAIL), refuse chosen recipients with any reply (e.g. "550 5.1.1 ..."), advertise STARTTLS with
a self-signed certificate, leave SMTPUTF8 out, answer slowly, or hang up right after "354".
Every accepted message is recorded with its envelope and the exact bytes received
(dot-unstuffed, as stored).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.ports import free_port


@dataclass
class ReceiverScript:
    """What the receiver does; tests change it before connecting."""

    defer_first_transactions: int = 0
    refuse_recipients: dict[str, str] = field(default_factory=dict)
    pipelining: bool = True
    starttls: bool = False
    delay_mail_seconds: float = 0.0
    delay_data_end_seconds: float = 0.0
    hang_up_after_354: bool = False
    refuse_ehlo: bool = False  # an RFC 821 server: 502 to EHLO, HELO works
    smtputf8: bool = True  # advertise SMTPUTF8 (RFC 6531), as aiosmtpd does by default


@dataclass(frozen=True)
class ReceivedMessage:
    mail_from: str
    rcpt_tos: list[str]
    mail_options: list[str]
    content: bytes


@functools.cache
def self_signed_certificate(common_name: str = "mx.example.test") -> tuple[Path, Path]:
    """A throw-away certificate and key (openssl), made once per test session."""
    directory = Path(tempfile.mkdtemp(prefix="smtp-cert-"))
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={common_name}", "-addext", f"subjectAltName=DNS:{common_name}",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


class _ScriptedHandler:
    def __init__(self, receiver: ScriptedSmtpReceiver) -> None:
        self.receiver = receiver

    async def handle_EHLO(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        hostname: str,
        responses: list[str],
    ) -> list[str]:
        if self.receiver.script.refuse_ehlo:
            return ["502 5.5.1 EHLO not implemented"]
        session.host_name = hostname
        if self.receiver.script.pipelining:
            responses.insert(len(responses) - 1, "250-PIPELINING")
        return responses

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        script = self.receiver.script
        if script.delay_mail_seconds:
            await asyncio.sleep(script.delay_mail_seconds)
        with self.receiver.lock:
            self.receiver.transactions_seen += 1
            if self.receiver.transactions_seen <= script.defer_first_transactions:
                return "451 4.3.2 Try again later"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        refusal = self.receiver.script.refuse_recipients.get(address)
        if refusal:
            return refusal
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_RSET(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self.receiver.lock:
            self.receiver.rsets_seen += 1
        return "250 2.0.0 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.receiver.script.delay_data_end_seconds:
            await asyncio.sleep(self.receiver.script.delay_data_end_seconds)
        assert envelope.mail_from is not None and envelope.original_content is not None
        message = ReceivedMessage(
            envelope.mail_from,
            list(envelope.rcpt_tos),
            list(envelope.mail_options),
            envelope.original_content,
        )
        with self.receiver.lock:
            self.receiver.messages.append(message)
        return "250 2.0.0 OK: queued"


class _HangingUpSmtp(SMTP):
    """Hangs up right after "354" when the script says so (a receiver dying mid-DATA)."""

    def __init__(self, receiver: ScriptedSmtpReceiver, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receiver = receiver

    async def smtp_DATA(self, arg: str) -> None:
        if self.receiver.script.hang_up_after_354 and self.envelope and self.envelope.rcpt_tos:
            await self.push("354 End data with <CR><LF>.<CR><LF>")
            assert self.transport is not None
            self.transport.close()
            return
        await super().smtp_DATA(arg)


class _ScriptedController(Controller):
    def __init__(self, receiver: ScriptedSmtpReceiver, **kwargs: Any) -> None:
        super().__init__(_ScriptedHandler(receiver), **kwargs)
        self.receiver = receiver

    def factory(self) -> SMTP:
        return _HangingUpSmtp(self.receiver, self.handler, **self.SMTP_kwargs)


class ScriptedSmtpReceiver:
    """The receiver; `start()` it with its script set (STARTTLS is fixed at start)."""

    def __init__(self, script: ReceiverScript | None = None) -> None:
        self.script = script or ReceiverScript()
        self.lock = threading.Lock()
        self.messages: list[ReceivedMessage] = []
        self.transactions_seen = 0
        self.rsets_seen = 0
        self.host = "127.0.0.1"
        self.port = 0
        self._controller: _ScriptedController | None = None

    def start(self) -> None:
        kwargs: dict[str, Any] = {}
        if self.script.starttls:
            cert, key = self_signed_certificate()
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)
            kwargs["tls_context"] = context
        kwargs["enable_SMTPUTF8"] = self.script.smtputf8
        self.port = free_port()
        self._controller = _ScriptedController(
            self,
            # A plain asyncio loop of its own: trio-asyncio, once imported anywhere in the
            # process, swaps the loop policy, and its loops cannot run in this thread.
            loop=asyncio.DefaultEventLoopPolicy().new_event_loop(),
            hostname=self.host,
            port=self.port,
            server_hostname="mx.example.test",
            decode_data=False,
            **kwargs,
        )
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def received(self) -> list[ReceivedMessage]:
        with self.lock:
            return list(self.messages)
