"""The thin Trio driver of the outbound SMTP client: sockets, TLS and timeouts around
`SmtpClientProtocol`, which decides everything else.

Every failure leaves here as a `DeliveryError` (see `postwire.errors`), translated in one place
per kind: `_stream_failure` for the network, `_raise_for_event` for the peer's bytes.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import trio

from postwire.errors import (
    ConnectionFailed,
    DeliveryError,
    InvalidCommandArgument,
    ProtocolError,
    SessionRejected,
    SmtpTimeout,
    TlsRequired,
)
from postwire.smtp.client_protocol import (
    NEED_DATA,
    Capabilities,
    ConnectionClosed,
    EhloReply,
    Greeting,
    MalformedReply,
    Reply,
    SmtpClientProtocol,
    Transaction,
    needing_smtputf8,
)

TlsPolicy = Literal["opportunistic", "enforced", "none"]
SslContextFactory = Callable[[bool], ssl.SSLContext]
"""Makes the TLS context; the argument says whether the certificate must verify for the host."""

_RECEIVE_SIZE = 65536


@dataclass(frozen=True)
class Timeouts:
    """Seconds allowed per phase; defaults from RFC 5321 §4.5.3.2 where it gives one."""

    connect: float = 30.0  # not in the RFC; a dead MX should not hold a worker for minutes
    greeting: float = 300.0  # §4.5.3.2.1 initial 220: 5 minutes
    ehlo: float = 300.0  # as MAIL
    tls_handshake: float = 60.0
    mail: float = 300.0  # §4.5.3.2.2: 5 minutes
    rcpt: float = 300.0  # §4.5.3.2.3: 5 minutes
    data_initiation: float = 120.0  # §4.5.3.2.4: 2 minutes
    data_block: float = 180.0  # §4.5.3.2.5: 3 minutes per send
    data_min_rate: float = 8192.0  # bytes/s a peer must at least take the body at
    final_dot: float = 600.0  # §4.5.3.2.6: 10 minutes
    quit: float = 10.0

    def data_transfer(self, size: int) -> float:
        """The whole body's transfer time: a block's allowance plus size at the minimum rate."""
        return self.data_block + size / self.data_min_rate


def default_ssl_context(verify: bool) -> ssl.SSLContext:
    """The system's trust store when verifying; otherwise encryption without authentication,
    which is what opportunistic TLS to an MX (RFC 7435) means.
    """
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


# What a failing stream raises; trio.SSLStream reports a failed handshake as
# BrokenResourceError from the SSLError.
_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _stream_failure(phase: str, error: BaseException) -> DeliveryError:
    """A network failure of one phase, as the DeliveryError to raise."""
    cause = error if isinstance(error, ssl.SSLError) else error.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return TlsRequired(f"certificate does not verify: {cause.verify_message}")
    return ConnectionFailed(f"{phase} failed: {error!r}")


@asynccontextmanager
async def _translate_stream_errors(phase: str, seconds: float) -> AsyncIterator[None]:
    """Network and clock failures of one phase (connecting, a handshake), as DeliveryErrors."""
    try:
        with trio.fail_after(seconds):
            yield
    except trio.TooSlowError:
        raise SmtpTimeout(phase, seconds) from None
    except _STREAM_ERRORS as error:
        raise _stream_failure(phase, error) from error


def _raise_for_event(event: object, phase: str) -> None:
    if isinstance(event, MalformedReply):
        raise ProtocolError(f"malformed reply during {phase}: {event.reason}")
    if isinstance(event, ConnectionClosed):
        raise ConnectionFailed(f"the server closed the connection during {phase}")


class SmtpConnection:
    """One open SMTP session, past the greeting, EHLO and (per policy) STARTTLS.

    It owns its stream: `aclose()` (or `quit()`) releases it. Calls are not concurrent-safe:
    one transaction at a time. Cancelling a call (or any `DeliveryError` other than a refused
    transaction) leaves the session in an unknown state, so the connection is closed and
    `usable` turns False; the caller opens a new one.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        protocol: SmtpClientProtocol,
        timeouts: Timeouts,
        *,
        tls_active: bool,
    ) -> None:
        self._stream = stream
        self._protocol = protocol
        self.timeouts = timeouts
        self.tls_active = tls_active
        self.usable = True
        # After a transaction ended by its final dot's reply the session is back where MAIL may
        # follow (RFC 5321 §4.1.1.4); only one that ended otherwise is cleared with RSET, which
        # spares a round trip per message on a reused connection.
        self._needs_rset = False

    @property
    def capabilities(self) -> Capabilities | None:
        """What the server advertised in its last EHLO (after TLS when TLS is active)."""
        return self._protocol.capabilities

    @property
    def protocol(self) -> SmtpClientProtocol:
        return self._protocol

    # A bare CancelScope per send and receive, not `trio.fail_after` in a context manager of
    # our own: two generator-based context managers per call were a twentieth of the time.
    async def _send(self, data: bytes, phase: str, seconds: float) -> None:
        with trio.CancelScope(deadline=trio.current_time() + seconds):
            try:
                await self._stream.send_all(data)
            except _STREAM_ERRORS as error:
                raise _stream_failure(phase, error) from error
            return
        raise SmtpTimeout(phase, seconds)

    async def _next_event(self, phase: str, seconds: float) -> object:
        event = self._protocol.next_event()
        if event is not NEED_DATA:  # read already: a pipelined group's replies come together
            _raise_for_event(event, phase)
            return event
        with trio.CancelScope(deadline=trio.current_time() + seconds):
            try:
                while event is NEED_DATA:
                    received = await self._stream.receive_some(_RECEIVE_SIZE)
                    self._protocol.receive_data(bytes(received))
                    event = self._protocol.next_event()
            except _STREAM_ERRORS as error:
                raise _stream_failure(phase, error) from error
            _raise_for_event(event, phase)
            return event
        raise SmtpTimeout(phase, seconds)

    async def _reply(self, phase: str, seconds: float) -> Reply:
        event = await self._next_event(phase, seconds)
        if isinstance(event, EhloReply | Greeting):
            return event.reply
        assert isinstance(event, Reply)
        return event

    async def _command(self, data: bytes, phase: str, seconds: float) -> Reply:
        await self._send(data, phase, seconds)
        return await self._reply(phase, seconds)

    async def send_message(
        self,
        envelope_from: str,
        recipients: Sequence[str],
        body: bytes,
        *,
        smtputf8: bool = False,
    ) -> Transaction:
        """Send one message; refusals are replies in the returned `Transaction`, not errors.

        Pipelines MAIL, RCPT and DATA when the server offers PIPELINING. The body's bytes are
        sent exactly (dot-stuffed only). A second message on the connection is preceded by RSET.
        SMTPUTF8 is asked for when `smtputf8` is set or an address is not ASCII. A server that
        does not offer it is never offered a non-ASCII recipient: those are the transaction's
        `refused_locally` and the others are sent (with none left, nothing is); a non-ASCII
        sender, or `smtputf8` set, raises `InvalidCommandArgument` then.
        Raises `DeliveryError` when the session itself fails; the connection is closed then.
        """
        if not self.usable:
            raise RuntimeError("this SMTP connection failed or was closed; open a new one")
        if not recipients:
            raise ValueError("a message needs at least one recipient")
        sendable, refused = needing_smtputf8(list(recipients), self.capabilities)
        if not sendable:
            return Transaction(envelope_from, [], refused_locally=refused)
        smtputf8 = smtputf8 or not envelope_from.isascii() or any(not r.isascii() for r in sendable)
        try:
            transaction = await self._send_message(envelope_from, sendable, body, smtputf8)
        except InvalidCommandArgument:
            raise  # refused before a byte of the transaction was sent: the session is intact
        except BaseException:
            await self._abort()
            raise
        transaction.refused_locally = refused
        return transaction

    async def _send_message(
        self, envelope_from: str, recipients: list[str], body: bytes, smtputf8: bool
    ) -> Transaction:
        protocol, timeouts = self._protocol, self.timeouts
        if self._needs_rset:
            reply = await self._command(protocol.rset(), "rset", timeouts.mail)
            if not reply.is_positive:
                raise SessionRejected(f"RSET refused: {reply}", code=reply.code)
        self._needs_rset = True
        body_8bit = not body.isascii()
        mail = protocol.mail_from(
            envelope_from, recipients, size=len(body), body_8bit=body_8bit, smtputf8=smtputf8
        )
        transaction = protocol.transaction
        assert transaction is not None
        pipelining = protocol.capabilities is not None and protocol.capabilities.pipelining
        if pipelining:
            group = mail + b"".join(protocol.rcpt_to(r) for r in recipients) + protocol.data()
            await self._send(group, "mail", timeouts.mail)
            await self._reply("mail", timeouts.mail)
            for _ in recipients:
                await self._reply("rcpt", timeouts.rcpt)
            data_reply = await self._reply("data initiation", timeouts.data_initiation)
        else:
            if not (await self._command(mail, "mail", timeouts.mail)).is_positive:
                return transaction
            for recipient in recipients:
                await self._command(protocol.rcpt_to(recipient), "rcpt", timeouts.rcpt)
            if not any(reply.is_positive for _, reply in transaction.recipient_replies):
                return transaction
            data_reply = await self._command(
                protocol.data(), "data initiation", timeouts.data_initiation
            )
        if data_reply.code != 354:
            return transaction
        # A pipelining server may answer DATA with 354 though it refused every RCPT; an
        # empty message ends the DATA phase without delivering anything (RFC 2920 §3.1).
        accepted_any = any(reply.is_positive for _, reply in transaction.recipient_replies)
        payload = protocol.message(body if accepted_any else b"")
        await self._send(payload, "data transfer", timeouts.data_transfer(len(payload)))
        await self._reply("final dot", timeouts.final_dot)
        self._needs_rset = False
        return transaction

    async def quit(self) -> None:
        """Say QUIT politely (its reply is not awaited beyond `timeouts.quit`), then close."""
        if self.usable:
            with contextlib.suppress(DeliveryError):  # the session is being ended anyway
                await self._command(self._protocol.quit(), "quit", self.timeouts.quit)
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection without QUIT; safe to call more than once."""
        self.usable = False
        # A TLS close_notify may wait on a dead peer; a cancelled aclose still closes the socket.
        with trio.move_on_after(self.timeouts.quit):
            await self._stream.aclose()

    async def _abort(self) -> None:
        self.usable = False
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self._stream)


async def open_smtp_connection(
    host: str,
    port: int,
    *,
    helo_name: str,
    tls_policy: TlsPolicy,
    ssl_context_factory: SslContextFactory = default_ssl_context,
    timeouts: Timeouts | None = None,
    connect_address: str | None = None,
    credentials: tuple[str, str] | None = None,
) -> SmtpConnection:
    """Connect to `host` (or `connect_address`, e.g. an MX's resolved IP, keeping `host` for
    TLS verification), read the greeting, say EHLO (HELO when EHLO gets 5xx), and negotiate
    STARTTLS per `tls_policy`:

    - "opportunistic": when offered, without certificate verification (RFC 7435); a refused
      STARTTLS goes on in clear, a failed handshake is a `ConnectionFailed` (the retry may
      then choose "none").
    - "enforced": must be offered and the certificate must verify for `host`, else `TlsRequired`.
    - "none": never.

    `credentials` are sent with AUTH PLAIN (smarthosts) only over TLS, unless the policy is
    "none". The caller owns the returned connection; on any error or cancellation here the
    socket is closed before the exception leaves.
    """
    timeouts = timeouts or Timeouts()
    async with _translate_stream_errors("connect", timeouts.connect):
        stream: trio.abc.Stream = await trio.open_tcp_stream(connect_address or host, port)
    connection = SmtpConnection(stream, SmtpClientProtocol(), timeouts, tls_active=False)
    try:
        greeting = await connection._reply("greeting", timeouts.greeting)
        if greeting.code != 220:
            raise SessionRejected(
                f"{host} refused the session: {greeting}",
                code=greeting.code,
                enhanced=greeting.enhanced,
            )
        await _say_hello(connection, helo_name)
        capabilities = connection.protocol.capabilities
        offered = capabilities is not None and capabilities.starttls
        if tls_policy == "enforced" and not offered:
            raise TlsRequired(f"{host} does not offer STARTTLS and TLS is enforced")
        if tls_policy != "none" and offered:
            enforced = tls_policy == "enforced"
            if await _start_tls(connection, host, ssl_context_factory(enforced), enforced):
                await _say_hello(connection, helo_name)
        if credentials is not None:
            await _authenticate(connection, host, tls_policy, credentials)
    except BaseException:
        await connection._abort()
        raise
    return connection


async def _say_hello(connection: SmtpConnection, helo_name: str) -> None:
    protocol, timeouts = connection.protocol, connection.timeouts
    event = await connection._command(protocol.ehlo(helo_name), "ehlo", timeouts.ehlo)
    if event.is_positive:
        return
    if event.is_permanent:  # an RFC 821 server: fall back to HELO
        event = await connection._command(protocol.helo(helo_name), "ehlo", timeouts.ehlo)
        if event.is_positive:
            return
    raise SessionRejected(f"EHLO/HELO refused: {event}", code=event.code, enhanced=event.enhanced)


async def _start_tls(
    connection: SmtpConnection, host: str, context: ssl.SSLContext, enforced: bool
) -> bool:
    """STARTTLS and the handshake; False when the server refused STARTTLS and the policy lets
    the session go on in clear (the session is unchanged then, RFC 3207 §4).
    """
    timeouts = connection.timeouts
    reply = await connection._command(
        connection.protocol.starttls(), "starttls", timeouts.tls_handshake
    )
    if reply.code != 220:
        if enforced:
            raise TlsRequired(f"STARTTLS refused: {reply}")
        return False
    connection.protocol.tls_established()
    tls_stream = trio.SSLStream(connection._stream, context, server_hostname=host)
    async with _translate_stream_errors("tls handshake", timeouts.tls_handshake):
        await tls_stream.do_handshake()
    connection._stream = tls_stream
    connection.tls_active = True
    return True


async def _authenticate(
    connection: SmtpConnection, host: str, tls_policy: TlsPolicy, credentials: tuple[str, str]
) -> None:
    if not connection.tls_active and tls_policy != "none":
        raise TlsRequired(f"{host}: credentials are never sent without TLS")
    user, password = credentials
    reply = await connection._command(
        connection.protocol.auth_plain(user, password), "auth", connection.timeouts.ehlo
    )
    if reply.code != 235:
        raise SessionRejected(f"AUTH refused: {reply}", code=reply.code, enhanced=reply.enhanced)
