"""SMTP submission: aiosmtpd, run under trio-asyncio, as an adapter only.

aiosmtpd speaks the protocol (EHLO, STARTTLS, AUTH, dot-stuffing, SIZE, line limits); every
accept/reject decision is a pure function of `submission_policy`, and an accepted message goes
through the REST API's accept path (`Acceptor`), so it is checked, signed and group-committed
like API mail. `250` is sent only after the commit.

The same listeners take what comes back: delivery status notifications and feedback reports
sent, without AUTH, to the VERP return paths and complaint addresses of Postwire's domains
(port 25 in production, where the return-path hosts' MX points). Those become events and
suppressions of the emails they are about (`postwire.inbound`), committed before the `250`;
and messages to the unsubscribe addresses of broadcasts (`unsub+<token>@<return-path host>`,
`postwire.unsubscribe`), which unsubscribe the contact their token names whatever they say.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, AnyStr, TypeVar

import trio
from aiosmtpd.smtp import MISSING, SMTP, AuthResult, Envelope, LoginPassword, Session, syntax

from postwire import _core
from postwire.accept import (
    IDEMPOTENCY_HEADERS,
    Acceptor,
    IdempotentRequest,
    PreparedEmail,
    SubmittedMessage,
    header_addresses,
)
from postwire.client_addresses import client_source
from postwire.config import Config, split_host_port
from postwire.connections import (
    ClientConnections,
    ClientSlot,
    accept_connections,
    close_quietly,
    listen_error,
)
from postwire.domains.records import parse_domain_name
from postwire.domains.store import DomainRecord, scan_all_domains
from postwire.errors import ApiError, ConfigError, SpoolFullError, StoreUnavailableError
from postwire.inbound.apply import (
    InboundAddress,
    apply_report,
    load_return_path_key,
    recognise_address,
)
from postwire.inbound.reports import parse_report
from postwire.inbound.verp import ReturnPathKey, parse_verp
from postwire.smtp import submission_policy as policy
from postwire.smtp.received import SubmissionTrace, received_field
from postwire.smtp.submission_policy import Reply, SessionFacts
from postwire.smtp.tls_material import ServedCertificate, ensure_tls_material
from postwire.store.accounts import ApiKeyRecord, authenticate
from postwire.store.auth_failures import count_auth_failures, record_auth_failure
from postwire.store.idempotency import IdempotencyScope, validate_key
from postwire.store.outages import Outage
from postwire.unsubscribe.apply import MailtoAddress, mailto_target, unsubscribe
from postwire.unsubscribe.links import (
    UnsubscribeTarget,
    load_unsubscribe_secret,
    parse_mailto_address,
)
from postwire.webhooks.tracking import Tracking

if TYPE_CHECKING:
    from postwire.services import ServiceDeps

log = logging.getLogger("postwire.smtp")

ParsedT = TypeVar("ParsedT")
ResultT = TypeVar("ResultT")

IDEMPOTENCY_ENDPOINT = "SMTP DATA"
# Said once a minute at most while the database is unreachable.
REFUSING = Outage("SMTP submission (answering 451 4.3.0)")

# aiosmtpd's own replies that deserve a better text; the others get the enhanced status code
# (RFC 3463) they lack from `with_enhanced_code`.
_STOCK_REPLIES = {
    "530 Must issue a STARTTLS command first": policy.MUST_STARTTLS,
    "500 Command line too long": policy.COMMAND_TOO_LONG,
    "552 Error: message size exceeds fixed maximum message size": policy.MESSAGE_TOO_BIG,
}


@dataclass(frozen=True, slots=True)
class SubmissionListeners:
    """The bound addresses, reported once every listener accepts connections."""

    starttls: list[tuple[str, int]]
    tls: list[tuple[str, int]]


# Connections waiting to be accepted, per listener: bulk senders open dozens at once.
LISTEN_BACKLOG = 1024


@dataclass(frozen=True, slots=True)
class ListeningSocket:
    """A bound, listening socket of SMTP submission; every service process accepts from it."""

    sock: socket.socket
    implicit_tls: bool


def bind_submission_sockets(config: Config) -> list[ListeningSocket]:
    """Bind and listen on every address of `smtp.starttls_listen` and `smtp.tls_listen`.

    Bound once, in the first process, so that worker processes inherit the same sockets (one
    port per listener, even port 0) and a port already taken is reported once, as a config error.
    """
    bound: list[ListeningSocket] = []
    keys = [("smtp.starttls_listen", a, False) for a in config.smtp.starttls_listen]
    keys += [("smtp.tls_listen", a, True) for a in config.smtp.tls_listen]
    try:
        for key, address, implicit_tls in keys:
            for sock in _bind(key, address):
                bound.append(ListeningSocket(sock, implicit_tls))
    except BaseException:
        for listener in bound:
            listener.sock.close()
        raise
    return bound


def _bind(key: str, address: str) -> list[socket.socket]:
    host, port = split_host_port(address)
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigError(f"config key {key!r}: cannot resolve {address!r}: {exc}") from None
    socks: list[socket.socket] = []
    seen: set[tuple[object, ...]] = set()
    try:
        for family, kind, proto, _, sockaddr in infos:
            if (family, *sockaddr[:2]) in seen:
                continue
            seen.add((family, *sockaddr[:2]))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(sockaddr)
            except OSError as exc:
                raise listen_error(key, address, exc) from None
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
            sock.set_inheritable(True)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


@dataclass(slots=True)
class _InFlight:
    """DATA commands being accepted: shutdown lets them finish before the loop closes."""

    count: int = 0
    idle: trio.Event = field(default_factory=trio.Event)


class _Envelope(Envelope):
    def __init__(self) -> None:
        super().__init__()
        # Whether the recipients accepted so far are Postwire's own (a bounce or complaint
        # report) rather than mail to send; None until the first recipient.
        self.inbound: bool | None = None
        # What the accepted unsubscribe addresses among them name.
        self.unsubscribes: list[UnsubscribeTarget] = []


# DATA is read in chunks up to the next ".\r\n" rather than line by line as aiosmtpd does
# (which took a quarter of the event loop's time at 4 KiB and half at 100 KiB); lines are
# checked once the whole message is in. The reader may buffer this much, commands included
# (a command line longer than its limit is still refused, once read).
_READ_LIMIT = 64 * 1024
MAX_DATA_LINE = 1001  # octets with the CRLF: RFC 5321's 1000, and aiosmtpd's one of slack
_END_OF_DATA = b"\r\n.\r\n"


async def read_data(reader: asyncio.StreamReader, max_size: int | None) -> bytes | Reply | None:
    """The content of a DATA command, dot-unstuffed, without its final "." line; the refusal,
    given once all of it is read (RFC 5321 4.2.5); None if the client went away."""
    kept: list[bytes] = []
    size = 0
    too_much = False
    tail = b"\r\n"  # the last two octets read: the DATA command ended its line
    while True:
        try:
            chunk = await reader.readuntil(b".\r\n")
        except asyncio.LimitOverrunError as overrun:  # none of these octets starts a ".\r\n"
            chunk = await reader.read(overrun.consumed)
        except asyncio.IncompleteReadError:
            return None
        ended = (tail + chunk).endswith(_END_OF_DATA)
        if ended:
            chunk = chunk[:-3]
        size += len(chunk)
        if max_size is not None and size > max_size:
            too_much = True  # read on to the end, keeping nothing
            kept.clear()
        elif chunk:
            kept.append(chunk)
        if ended:
            break
        tail = (tail + chunk)[-2:]
    if too_much:
        return policy.MESSAGE_TOO_BIG
    # A line starting with "." was sent with one more (RFC 5321 4.5.2).
    content, longest_line = _core.unstuff_data(b"".join(kept))
    if longest_line + 2 > MAX_DATA_LINE:
        return policy.LINE_TOO_LONG
    return content


# `<local@domain>` with dot-atom parts (RFC 5321 §4.1.2), then nothing or spaces and parameters:
# the shape nearly every MAIL and RCPT has. Anything else (quoted local parts, source routes,
# address literals, comments, odd spacing) goes to aiosmtpd's full parser.
_PLAIN_PATH = re.compile(
    r"[ \t]*<((?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+\.)*[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
    r"@(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+)>(?:[ \t]+([^ \t(].*))?",
    re.DOTALL,
)


# An implicit-TLS connection must finish its handshake within this long (asyncio's default is
# 60 s); after STARTTLS the session's idle timeout applies.
TLS_HANDSHAKE_TIMEOUT_SECONDS = 30.0

# The SASL mechanisms offered (RFC 4954), in EHLO's order. aiosmtpd would offer every `auth_*`
# attribute of the session class and of the handler as a mechanism, whatever it is.
AUTH_MECHANISMS = ("LOGIN", "PLAIN")


class _Session(Session):
    """aiosmtpd's session without `login_data`: aiosmtpd 1.4 sets that deprecated attribute
    itself after every successful AUTH, logging a deprecation warning each time (its issue
    347). Postwire reads `auth_data`, which the authenticator fills; the login is dropped."""

    # The credential whose AUTH just failed, until the failure is counted in the store.
    failed_credential: str | None = None
    # Whether the peer is in `smtp.trusted_networks`: asked at every MAIL, RCPT and DATA.
    trusted_peer: bool | None = None

    @property
    def login_data(self) -> None:
        return None

    @login_data.setter
    def login_data(self, value: object) -> None:
        pass


class _SubmissionSMTP(SMTP):
    line_length_limit = _READ_LIMIT  # the reader's buffer limit: see `read_data`
    _idle_deadline = 0.0
    # The connection's place in its client address's count, released once it closes.
    client_slot: ClientSlot | None = None

    def __init__(self, handler: SubmissionHandler, **settings: Any) -> None:
        super().__init__(handler, **settings)
        self._auth_methods = {name: self._auth_methods[name] for name in AUTH_MECHANISMS}

    def _create_session(self) -> Session:
        return _Session(self.loop)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        first = self._handler_coroutine is None  # not the TLS layer made by STARTTLS
        super().connection_made(transport)
        slot = self.client_slot
        if first and slot is not None and self._handler_coroutine is not None:
            # Also when the session ends without `connection_lost`: a failed STARTTLS handshake.
            self._handler_coroutine.add_done_callback(lambda _: slot.release())

    def connection_lost(self, error: Exception | None) -> None:
        super().connection_lost(error)
        if self.client_slot is not None:
            self.client_slot.release()

    # aiosmtpd's mechanisms, then the failure counted (a commit) before the 535 goes out, so
    # parallel sessions cannot guess ahead of the count. The authenticator itself is synchronous.
    async def auth_PLAIN(self, server: SMTP, args: list[str]) -> AuthResult:
        result = await super().auth_PLAIN(server, args)
        await self._count_failure()
        return result

    async def auth_LOGIN(self, server: SMTP, args: list[str]) -> AuthResult:
        result = await super().auth_LOGIN(server, args)
        await self._count_failure()
        return result

    async def _count_failure(self) -> None:
        session = self.session
        if isinstance(session, _Session) and session.failed_credential is not None:
            credential, session.failed_credential = session.failed_credential, None
            assert isinstance(self.event_handler, SubmissionHandler)
            record = _on_trio(self.event_handler.record_auth_failure)
            await record(_peer_host(session), credential)

    def _reset_timeout(self, duration: float | None = None) -> None:
        """The idle timeout, pushed back on every command. aiosmtpd cancels and re-arms a timer
        each time, and trio-asyncio keeps a cancelled timer until it would have fired: at a
        thousand messages a second, over a million of them a process. One timer per session
        instead, re-armed when it fires early."""
        self._idle_deadline = self.loop.time() + (duration or self._timeout_duration)
        handle = self._timeout_handle
        if handle is None or (not handle.cancelled() and self._idle_deadline < handle.when()):
            if handle is not None:
                handle.cancel()
            self._timeout_handle = self.loop.call_at(self._idle_deadline, self._idle_timer)
        # A cancelled handle means the connection is gone: nothing to time out any more.

    def _idle_timer(self) -> None:
        if self.loop.time() < self._idle_deadline:
            self._timeout_handle = self.loop.call_at(self._idle_deadline, self._idle_timer)
        else:
            self._timeout_cb()  # type: ignore[no-untyped-call]

    def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
        """aiosmtpd's address parsing, with a fast path for plain paths: its parser (the
        `email` package's, and a class made per call) was a tenth of the service's time."""
        match = _PLAIN_PATH.fullmatch(arg)
        if match is None:
            return super()._getaddr(arg)
        address, rest = match.group(1), match.group(2) or ""
        if self.local_part_limit and len(address.rpartition("@")[0]) > self.local_part_limit:
            return None, None
        return address, rest

    @syntax("DATA")
    async def smtp_DATA(self, arg: str) -> None:
        """aiosmtpd's DATA with `read_data` in place of its line-by-line loop."""
        if await self.check_helo_needed():
            return
        if await self.check_auth_needed("DATA"):
            return
        assert self.envelope is not None
        if not self.envelope.rcpt_tos:
            await self.push("503 Error: need RCPT command")
            return
        if arg:
            await self.push("501 Syntax: DATA")
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        content = await read_data(self._reader, self.data_size_limit)
        if content is None:
            self._writer.close()
            return
        if not isinstance(content, bytes):
            self._set_post_data_state()  # type: ignore[no-untyped-call]
            await self.push(policy.format_reply(content))
            return
        self.envelope.content = self.envelope.original_content = content
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()  # type: ignore[no-untyped-call]
        await self.push("250 OK" if status is MISSING else status)

    async def push(self, status: AnyStr) -> None:
        if isinstance(status, str) and status in _STOCK_REPLIES:
            await super().push(policy.format_reply(_STOCK_REPLIES[status]))
        elif isinstance(status, str):
            await super().push(policy.with_enhanced_code(status))
        else:
            await super().push(status)

    def _create_envelope(self) -> Envelope:
        return _Envelope()

    async def handle_exception(self, error: Exception) -> str:
        """What a command gets when it failed: an unreachable database (any command reads the
        store: AUTH its keys, RCPT its return paths) is a temporary failure, said as such."""
        if isinstance(error, StoreUnavailableError):
            REFUSING.failed(error)
            return policy.format_reply(policy.DATABASE_UNREACHABLE)
        return await super().handle_exception(error)


class SubmissionHandler:
    """aiosmtpd's handler: asks the policy, and hands accepted DATA to the accept path."""

    def __init__(
        self,
        config: Config,
        deps: ServiceDeps,
        return_path_key: ReturnPathKey,
        unsubscribe_secret: bytes,
    ) -> None:
        self.config = config
        self.deps = deps
        self.return_path_key = return_path_key  # checks who may send reports, and about what
        self.unsubscribe_secret = unsubscribe_secret  # checks the unsubscribe addresses' tokens
        # Tracking as for API mail: URLs at `api.public_url`, the spool's secret.
        tracking = Tracking(deps.spool, config.api.public_url)
        self.acceptor = Acceptor(deps.spool, tracking=tracking, path="smtp")
        self._verified_snapshot: tuple[float, list[DomainRecord]] | None = None
        self.in_flight = _InFlight()
        self.in_flight.idle.set()

    def facts(self, session: Session) -> SessionFacts:
        trusted = session.trusted_peer if isinstance(session, _Session) else None
        if trusted is None:
            trusted = self.config.smtp.is_trusted(_peer_host(session))
            if isinstance(session, _Session):
                session.trusted_peer = trusted
        return SessionFacts(authenticated=bool(session.authenticated), trusted_peer=trusted)

    def authenticator(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword) or not isinstance(session, _Session):
            return AuthResult(success=False, handled=False)
        username = auth_data.login.decode("utf-8", "replace")
        password = auth_data.password.decode("utf-8", "replace")
        credential = policy.auth_credential(username, password)
        source = client_source(_peer_host(session))
        failures = count_auth_failures(self.deps.spool, source, credential, _now_ms())
        refusal = policy.on_auth_attempt(
            failures.from_source, failures.with_credential, self.config.smtp.max_auth_failures
        )
        if refusal is None:
            key = authenticate(self.deps.spool, password)
            refusal = policy.on_auth(username, key is not None)
            if refusal is None:
                return AuthResult(success=True, auth_data=key)
            session.failed_credential = credential  # counted by the session before replying
            log.info("failed SMTP AUTH from %s", _peer_host(session))
        return AuthResult(success=False, handled=False, message=policy.format_reply(refusal))

    async def record_auth_failure(self, client: str, credential: str) -> None:
        """Count a failed AUTH in the store that every process shares (a Trio task)."""
        if self.config.smtp.max_auth_failures > 0:
            source = client_source(client)
            try:
                await record_auth_failure(self.deps.spool, source, credential, _now_ms())
            except SpoolFullError:  # the client still gets its 535
                log.warning("a failed SMTP AUTH from %s was not counted: the spool is full", client)
            except StoreUnavailableError:
                log.warning("a failed SMTP AUTH from %s was not counted: no database", client)

    async def handle_MAIL(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        refusal = policy.on_mail(self.facts(session))
        if refusal is not None:
            return policy.format_reply(refusal)
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        assert isinstance(envelope, _Envelope)
        refusal = policy.on_rcpt_address(address)
        if refusal is not None:
            return policy.format_reply(refusal)
        facts = self.facts(session)
        kind = recognise_address(self.deps.spool, self.return_path_key, address, _now_ms())
        unsubscribing = mailto_target(self.deps.spool, self.unsubscribe_secret, address)
        ours = kind is not InboundAddress.OTHER or unsubscribing is not MailtoAddress.OTHER
        inbound = policy.is_inbound(facts, ours)
        if inbound and kind is InboundAddress.UNKNOWN:  # a forged or expired return path
            return policy.format_reply(policy.UNKNOWN_RETURN_PATH)
        if inbound and unsubscribing is MailtoAddress.FORGED:
            return policy.format_reply(policy.UNKNOWN_UNSUBSCRIBE_ADDRESS)
        refusal = policy.on_rcpt(facts, len(envelope.rcpt_tos), inbound, envelope.inbound)
        if refusal is not None:
            return policy.format_reply(refusal)
        envelope.inbound = inbound
        if inbound and isinstance(unsubscribing, UnsubscribeTarget):
            envelope.unsubscribes.append(unsubscribing)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        assert isinstance(envelope, _Envelope)
        content = envelope.original_content or b""
        refusal = policy.on_data(content, self.config.smtp.max_message_size)
        if refusal is None and not envelope.inbound and not policy.may_relay(self.facts(session)):
            refusal = policy.RELAYING_DENIED  # RCPT let no such recipient through: a second lock
        if refusal is not None:
            return policy.format_reply(refusal)
        recipients = list(envelope.rcpt_tos)
        if envelope.inbound:
            # Unsubscribe addresses take any message; the others (return paths, complaint
            # addresses) take reports, once the unsubscribes are committed.
            reports = [r for r in recipients if parse_mailto_address(r) is None]
            reply: Reply = policy.UNSUBSCRIBED
            if envelope.unsubscribes:
                reply = await _on_trio(self.receive_unsubscribes)(envelope.unsubscribes)
            if reports and reply == policy.UNSUBSCRIBED:
                reply = await _on_trio(self.receive_report)(reports, content)
        else:
            key = session.auth_data if isinstance(session.auth_data, ApiKeyRecord) else None
            accept = _on_trio(self.accept)
            reply = await accept(key, recipients, content, self.trace(server, session))
        return policy.format_reply(reply)

    def trace(self, server: SMTP, session: Session) -> SubmissionTrace:
        """What the `Received:` field of this session's messages says."""
        transport = server.transport
        tls = None if transport is None else transport.get_extra_info("ssl_object")
        cipher = tls.cipher() if isinstance(tls, ssl.SSLObject | ssl.SSLSocket) else None
        return SubmissionTrace(
            helo=session.host_name,
            client_address=_peer_host(session),
            server_name=self.config.delivery.helo_name,
            extended=session.extended_smtp,
            authenticated=bool(session.authenticated),
            tls_version=None if cipher is None else cipher[1],
            tls_cipher=None if cipher is None else cipher[0],
            tls_bits=None if cipher is None else cipher[2],
        )

    async def accept(
        self,
        key: ApiKeyRecord | None,
        recipients: list[str],
        content: bytes,
        trace: SubmissionTrace,
    ) -> Reply:
        """Accept one message (a Trio task); the reply is 250 only once it is committed. If the
        client goes away meanwhile, the commit either happened whole or not at all."""
        with self._in_flight():
            try:
                return await self._accept(key, recipients, content, trace)
            except ApiError as refusal:
                return policy.reply_for_refusal(refusal)
            except SpoolFullError:
                return policy.INSUFFICIENT_STORAGE
            except StoreUnavailableError as error:
                REFUSING.failed(error)
                return policy.DATABASE_UNREACHABLE

    async def receive_report(self, recipients: list[str], content: bytes) -> Reply:
        """Apply a bounce (DSN) or complaint (ARF) report sent to Postwire's own addresses (a
        Trio task). 250 only once its events and suppressions are committed; a report about
        no email of ours is taken and dropped, and anything that is not a report is refused,
        so its sender, not Postwire, keeps it."""
        with self._in_flight():
            report = await _off_thread_if_large(parse_report, content)
            if report is None:
                return policy.NOT_A_REPORT
            # The VERP address names the email; a complaint address leaves it to the report.
            rcpt_to = next((r for r in recipients if parse_verp(r)), recipients[0])
            try:
                applied = await apply_report(
                    self.deps.spool, self.return_path_key, report, rcpt_to, _now_ms()
                )
            except SpoolFullError:
                return policy.INSUFFICIENT_STORAGE
            except StoreUnavailableError as error:
                REFUSING.failed(error)
                return policy.DATABASE_UNREACHABLE
            if applied is None:
                log.info("report to %s names no email of ours, or nothing applies", rcpt_to)
            else:
                log.info("report on %s: %s", applied.email_id, ", ".join(applied.events))
            return policy.REPORT_RECEIVED

    async def receive_unsubscribes(self, targets: list[UnsubscribeTarget]) -> Reply:
        """Unsubscribe the contacts a message's unsubscribe addresses name (RFC 2369's mailto;
        a Trio task), whatever the message says; 250 once committed."""
        with self._in_flight():
            for target in targets:
                try:
                    applied = await unsubscribe(self.deps.spool, target, _now_ms())
                except SpoolFullError:
                    return policy.INSUFFICIENT_STORAGE
                except StoreUnavailableError as error:
                    REFUSING.failed(error)
                    return policy.DATABASE_UNREACHABLE
                if applied is not None and applied.changed:
                    log.info("contact %s unsubscribed by mail", target.contact_id)
            return policy.UNSUBSCRIBED

    def _verified_domains(self, max_age: float) -> list[DomainRecord]:
        """Every team's verified domains, read again when older than `max_age` seconds: trusted
        relays send in bulk, and a scan of all domains per message cost a tenth of the time. The
        snapshot only names the team; the accept path then checks the domain in the store."""
        now = time.monotonic()
        if self._verified_snapshot is None or now - self._verified_snapshot[0] >= max_age:
            domains = [d for d in scan_all_domains(self.deps.spool) if d.status == "verified"]
            self._verified_snapshot = (now, domains)
        return self._verified_snapshot[1]

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        """Counts DATA commands being handled: shutdown waits for them."""
        if self.in_flight.count == 0:
            self.in_flight.idle = trio.Event()
        self.in_flight.count += 1
        try:
            yield
        finally:
            self.in_flight.count -= 1
            if self.in_flight.count == 0:
                self.in_flight.idle.set()

    async def _accept(
        self,
        key: ApiKeyRecord | None,
        recipients: list[str],
        content: bytes,
        trace: SubmissionTrace,
    ) -> Reply:
        message = await _off_thread_if_large(SubmittedMessage.parse, content)
        if key is not None:
            team_id = key.team_id
        else:  # a trusted network: the mail belongs to the team of its verified From domain
            domain = _team_domain_of_sender(self._verified_domains(max_age=1.0), message)
            if domain is None:  # or verified since the snapshot was read
                domain = _team_domain_of_sender(self._verified_domains(max_age=0.0), message)
            if domain is None:
                return (550, "5.7.1", "The From domain is not a verified domain")
            team_id = domain.team_id
        idempotency_key = validate_key(message.idempotency_key())
        idempotent = None
        if idempotency_key is not None:
            scope = IdempotencyScope(team_id, IDEMPOTENCY_ENDPOINT, idempotency_key)
            idempotent = IdempotentRequest(scope, _fingerprint(recipients, message))
        now = datetime.now(UTC)

        async def prepare() -> tuple[list[PreparedEmail], dict[str, Any]]:
            prepared = await self.acceptor.prepare_submitted(
                team_id,
                key,
                recipients,
                message,
                now,
                received=lambda email_id: received_field(trace, email_id, now),
            )
            return [prepared], {"id": prepared.record.id}

        response = await self.acceptor.accept(prepare, idempotent=idempotent, status=250, now=now)
        if self.deps.delivery is not None:
            self.deps.delivery.wake()
        log.info("accepted %s over SMTP for %d recipients", response["id"], len(recipients))
        return policy.accepted(str(response["id"]))


def _on_trio(task: Callable[..., Awaitable[ResultT]]) -> Callable[..., Awaitable[ResultT]]:
    """`task`, a Trio coroutine function, callable from aiosmtpd's asyncio side."""
    import trio_asyncio  # type: ignore[import-untyped]  # imported already, see serve_submission

    wrapped: Callable[..., Awaitable[ResultT]] = trio_asyncio.trio_as_aio(task)
    return wrapped


def _peer_host(session: Session) -> str:
    peer = session.peer
    return str(peer[0]) if isinstance(peer, tuple) else ""


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _off_thread_if_large(parse: Callable[[bytes], ParsedT], content: bytes) -> ParsedT:
    """Parsing a large message would stall every session on the Trio thread."""
    if len(content) > 256 * 1024:
        return await trio.to_thread.run_sync(parse, content)
    return parse(content)


def _fingerprint(recipients: Sequence[str], message: SubmittedMessage) -> str:
    """The same message to the same recipients, whatever idempotency header carried the key."""
    digest = hashlib.sha256()
    digest.update("\n".join(recipients).encode() + b"\n\n")
    digest.update(message.without(IDEMPOTENCY_HEADERS).to_bytes())
    return digest.hexdigest()


def _team_domain_of_sender(
    verified: Sequence[DomainRecord], message: SubmittedMessage
) -> DomainRecord | None:
    """Among `verified` domains (of every team), the one the From address falls under: the
    closest, as for API mail. Several teams may have verified the same name: then the mail
    belongs to none of them."""
    senders = header_addresses(tuple(message.values(b"from")))
    if len(senders) != 1 or "@" not in senders[0][1]:
        return None
    try:
        sender_domain = parse_domain_name(senders[0][1].rpartition("@")[2])
    except ApiError:
        return None
    covering = [
        domain
        for domain in verified
        if sender_domain == domain.name or sender_domain.endswith("." + domain.name)
    ]
    if len({domain.team_id for domain in covering}) != 1:
        return None
    return max(covering, key=lambda domain: len(domain.name))


async def serve_submission(
    config: Config,
    deps: ServiceDeps,
    *,
    listeners: Sequence[ListeningSocket] | None = None,
    task_status: trio.TaskStatus[SubmissionListeners] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve SMTP submission on `listeners`, by default `smtp.starttls_listen` and
    `smtp.tls_listen` bound here.

    Owns the listeners and a trio-asyncio loop that runs aiosmtpd's sessions. Reports the bound
    addresses once every listener accepts connections. When `deps.stopping` is set it closes
    the listeners, lets DATA commands being accepted finish, and returns; sessions still open
    are dropped with the loop (nothing of theirs was accepted). Cancellation drops everything;
    a commit in progress happens whole or not at all.
    """
    # aiosmtpd logs every command at INFO: noise that cost a twentieth of the time under load.
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    # Imported only here: importing trio_asyncio swaps asyncio's event loop policy for the
    # whole process, after which plain asyncio loops made in other threads (aiosmtpd's
    # Controller) no longer work. Only a process that serves SMTP should pay that.
    import trio_asyncio

    from postwire.smtp.asyncio_bridge import batch_callbacks

    # Read, and registered for SIGHUP, with no checkpoint between: a reload cannot be missed.
    served = ServedCertificate(*await ensure_tls_material(config))
    deps.reloads.register(served.reload)
    handler = SubmissionHandler(
        config,
        deps,
        await load_return_path_key(deps.spool, config),
        await load_unsubscribe_secret(deps.spool),
    )

    def session_factory(*, implicit_tls: bool) -> Callable[[], SMTP]:
        def make() -> SMTP:
            return _SubmissionSMTP(
                handler,
                data_size_limit=config.smtp.max_message_size,
                hostname=config.delivery.helo_name,
                ident="Postwire ESMTP",
                timeout=config.smtp.idle_timeout_seconds,
                # Implicit TLS: the socket already is TLS, so no STARTTLS and AUTH at once.
                tls_context=None if implicit_tls else served.context,
                require_starttls=not implicit_tls,
                auth_require_tls=not implicit_tls,
                authenticator=handler.authenticator,
                loop=asyncio.get_running_loop(),
            )

        return make

    owned = listeners is None  # bound here: closed here
    if listeners is None:
        listeners = bind_submission_sockets(config)
    clients = ClientConnections(config.smtp.max_connections_per_client)
    # asyncio closes the socket it serves on: each listener accepts on this process's duplicate.
    accepting = [listener.sock.dup() for listener in listeners]
    async with trio_asyncio.open_loop() as loop:
        batch_callbacks(loop)
        loop.set_exception_handler(_log_asyncio_error)
        # Sessions being handed to asyncio (a TLS handshake, for implicit TLS).
        starting: set[asyncio.Task[None]] = set()

        def start_sessions(implicit_tls: bool) -> Callable[[socket.socket, ClientSlot], None]:
            make_session = session_factory(implicit_tls=implicit_tls)

            def start(conn: socket.socket, slot: ClientSlot) -> None:
                ssl_context = served.context if implicit_tls else None
                task = loop.create_task(_start_session(conn, slot, make_session, ssl_context))
                starting.add(task)
                task.add_done_callback(starting.discard)

            return start

        bound: dict[bool, list[tuple[str, int]]] = {False: [], True: []}
        try:
            async with trio.open_nursery() as nursery:
                for listener, sock in zip(listeners, accepting, strict=True):
                    host, port = sock.getsockname()[:2]
                    bound[listener.implicit_tls].append((host, port))
                    kind = "implicit TLS" if listener.implicit_tls else "STARTTLS"
                    nursery.start_soon(
                        partial(
                            accept_connections,
                            sock,
                            start_sessions(listener.implicit_tls),
                            clients,
                            name=f"SMTP submission ({kind}) on {host}:{port}",
                            refuse=close_quietly if listener.implicit_tls else _refuse_plain,
                        )
                    )
                task_status.started(SubmissionListeners(starttls=bound[False], tls=bound[True]))
                for host, port in bound[False]:
                    log.info("SMTP submission (STARTTLS) on %s:%d", host, port)
                for host, port in bound[True]:
                    log.info("SMTP submission (implicit TLS) on %s:%d", host, port)
                await deps.stopping.wait()
                nursery.cancel_scope.cancel()  # stop accepting; sessions go on
        finally:
            for sock in accepting:
                sock.close()
            if owned:
                for listener in listeners:
                    listener.sock.close()
        await handler.in_flight.idle.wait()


async def _start_session(
    conn: socket.socket,
    slot: ClientSlot,
    make_session: Callable[[], SMTP],
    ssl_context: ssl.SSLContext | None,
) -> None:
    """Serve an accepted connection with a session of `make_session` (an asyncio task)."""

    def make() -> SMTP:
        session = make_session()
        assert isinstance(session, _SubmissionSMTP)
        session.client_slot = slot
        return session

    loop = asyncio.get_running_loop()
    try:
        await loop.connect_accepted_socket(
            make,
            conn,
            ssl=ssl_context,
            ssl_handshake_timeout=None if ssl_context is None else TLS_HANDSHAKE_TIMEOUT_SECONDS,
        )
    except OSError:  # gone before the session began, or its TLS handshake failed or timed out
        slot.release()
        conn.close()


def _refuse_plain(conn: socket.socket) -> None:
    """A connection past its client's cap, on a listener without implicit TLS: say why."""
    with suppress(OSError):
        conn.setblocking(False)  # the client reads nothing yet: the reply fits its buffer
        conn.send(f"{policy.format_reply(policy.TOO_MANY_CONNECTIONS)}\r\n".encode())
    conn.close()


def _log_asyncio_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """What asyncio reports with no caller to raise to (a session's transport failing) is
    logged, as plain asyncio does: trio-asyncio's default raises it into the loop's nursery,
    which would stop every session and listener of the process for one connection."""
    asyncio.BaseEventLoop.default_exception_handler(loop, context)  # type: ignore[arg-type]
