"""SMTP submission: aiosmtpd, run under trio-asyncio, as an adapter only.

aiosmtpd speaks the protocol (EHLO, STARTTLS, AUTH, dot-stuffing, SIZE, line limits); every
accept/reject decision is a pure function of `submission_policy`, and an accepted message goes
through the REST API's accept path (`Acceptor`), so it is checked, signed and group-committed
like API mail. `250` is sent only after the commit.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import getaddresses
from typing import TYPE_CHECKING, Any, AnyStr

import trio
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from postwire.accept import (
    IDEMPOTENCY_HEADERS,
    Acceptor,
    IdempotentRequest,
    PreparedEmail,
    SubmittedMessage,
)
from postwire.config import Config, split_host_port
from postwire.domains.store import DomainRecord, find_verified_domain_for_sender, scan_all_domains
from postwire.errors import ApiError, SpoolFullError
from postwire.smtp import submission_policy as policy
from postwire.smtp.submission_policy import Reply, SessionFacts
from postwire.smtp.tls_material import ensure_tls_material, server_tls_context
from postwire.store.accounts import ApiKeyRecord, authenticate
from postwire.store.idempotency import IdempotencyScope, validate_key

if TYPE_CHECKING:
    from postwire.app import ServiceDeps

log = logging.getLogger("postwire.smtp")

IDEMPOTENCY_ENDPOINT = "SMTP DATA"

# aiosmtpd's own replies, with the enhanced status codes (RFC 3463) it leaves out.
_STOCK_REPLIES = {
    "530 Must issue a STARTTLS command first": policy.MUST_STARTTLS,
    "500 Command line too long": policy.COMMAND_TOO_LONG,
    "500 Line too long (see RFC5321 4.5.3.1.6)": policy.LINE_TOO_LONG,
    "552 Error: Too much mail data": policy.MESSAGE_TOO_BIG,
    "552 Error: message size exceeds fixed maximum message size": policy.MESSAGE_TOO_BIG,
}


def is_inbound_address(address: str) -> bool:
    """Whether `address` is one of Postwire's own return-path or complaint addresses, which
    take mail without AUTH. None yet: inbound bounces and complaints are not handled, so every
    recipient of an unauthenticated session is a relay attempt."""
    return False


@dataclass(frozen=True, slots=True)
class SubmissionListeners:
    """The bound addresses, reported once every listener accepts connections."""

    starttls: list[tuple[str, int]]
    tls: list[tuple[str, int]]


@dataclass(slots=True)
class _InFlight:
    """DATA commands being accepted: shutdown lets them finish before the loop closes."""

    count: int = 0
    idle: trio.Event = field(default_factory=trio.Event)


class _SubmissionSMTP(SMTP):
    async def push(self, status: AnyStr) -> None:
        if isinstance(status, str) and status in _STOCK_REPLIES:
            await super().push(policy.format_reply(_STOCK_REPLIES[status]))
        else:
            await super().push(status)


class SubmissionHandler:
    """aiosmtpd's handler: asks the policy, and hands accepted DATA to the accept path."""

    def __init__(self, config: Config, deps: ServiceDeps) -> None:
        self.config = config
        self.deps = deps
        self.acceptor = Acceptor(deps.spool)
        self.in_flight = _InFlight()
        self.in_flight.idle.set()

    def facts(self, session: Session) -> SessionFacts:
        peer = session.peer
        host = peer[0] if isinstance(peer, tuple) else ""
        return SessionFacts(
            authenticated=bool(session.authenticated),
            trusted_peer=self.config.smtp.is_trusted(host),
        )

    def authenticator(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        username = auth_data.login.decode("utf-8", "replace")
        key = authenticate(self.deps.spool, auth_data.password.decode("utf-8", "replace"))
        refusal = policy.on_auth(username, key is not None)
        if refusal is not None:
            return AuthResult(success=False, handled=False, message=policy.format_reply(refusal))
        return AuthResult(success=True, auth_data=key)

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
        refusal = policy.on_rcpt(
            self.facts(session), len(envelope.rcpt_tos), is_inbound_address(address)
        )
        if refusal is not None:
            return policy.format_reply(refusal)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        facts = self.facts(session)
        refusal = policy.on_data(content, self.config.smtp.max_message_size)
        if refusal is None and not policy.may_relay(facts):
            # Only inbound addresses got through RCPT; their handling comes with inbound mail.
            refusal = policy.RELAYING_DENIED
        if refusal is not None:
            return policy.format_reply(refusal)
        key = session.auth_data if isinstance(session.auth_data, ApiKeyRecord) else None
        import trio_asyncio  # type: ignore[import-untyped]  # imported already, see below

        accept = trio_asyncio.trio_as_aio(self.accept)
        reply: Reply = await accept(key, list(envelope.rcpt_tos), content)
        return policy.format_reply(reply)

    async def accept(
        self, key: ApiKeyRecord | None, recipients: list[str], content: bytes
    ) -> Reply:
        """Accept one message (a Trio task); the reply is 250 only once it is committed. If the
        client goes away meanwhile, the commit either happened whole or not at all."""
        self.in_flight.count += 1
        self.in_flight.idle = trio.Event()
        try:
            return await self._accept(key, recipients, content)
        except ApiError as refusal:
            return policy.reply_for_refusal(refusal)
        except SpoolFullError:
            return (452, "4.3.1", "Insufficient system storage, try again later")
        finally:
            self.in_flight.count -= 1
            if self.in_flight.count == 0:
                self.in_flight.idle.set()

    async def _accept(
        self, key: ApiKeyRecord | None, recipients: list[str], content: bytes
    ) -> Reply:
        if len(content) > 256 * 1024:
            message = await trio.to_thread.run_sync(SubmittedMessage.parse, content)
        else:
            message = SubmittedMessage.parse(content)
        if key is not None:
            team_id = key.team_id
        else:  # a trusted network: the mail belongs to the team of its verified From domain
            domain = _verified_from_domain_of_any_team(self.deps.spool, message)
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
            prepared = await self.acceptor.prepare_submitted(team_id, key, recipients, message, now)
            return [prepared], {"id": prepared.record.id}

        response = await self.acceptor.accept(prepare, idempotent=idempotent, status=250, now=now)
        if self.deps.delivery is not None:
            self.deps.delivery.wake()
        log.info("accepted %s over SMTP for %d recipients", response["id"], len(recipients))
        return policy.accepted(str(response["id"]))


def _fingerprint(recipients: Sequence[str], message: SubmittedMessage) -> str:
    """The same message to the same recipients, whatever idempotency header carried the key."""
    digest = hashlib.sha256()
    digest.update("\n".join(recipients).encode() + b"\n\n")
    digest.update(message.without(IDEMPOTENCY_HEADERS).to_bytes())
    return digest.hexdigest()


def _verified_from_domain_of_any_team(spool: Any, message: SubmittedMessage) -> DomainRecord | None:
    """The verified domain the From address falls under, whichever team owns it. Several
    teams may have verified the same name: then the mail belongs to none of them.

    Scans every domain: trusted-network relaying is for a few bulk senders, and domains are few.
    """
    senders = getaddresses(message.values(b"from"))
    if len(senders) != 1 or "@" not in senders[0][1]:
        return None
    sender_domain = senders[0][1].rpartition("@")[2].lower()
    teams = {d.team_id for d in scan_all_domains(spool) if d.status == "verified"}
    found = [find_verified_domain_for_sender(spool, team, sender_domain) for team in teams]
    matches = [domain for domain in found if domain is not None]
    return matches[0] if len(matches) == 1 else None


async def serve_submission(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[SubmissionListeners] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve SMTP submission on `smtp.starttls_listen` and `smtp.tls_listen`.

    Owns the listeners and a trio-asyncio loop that runs aiosmtpd's sessions. Reports the bound
    addresses once every listener accepts connections. When `deps.stopping` is set it closes
    the listeners, lets DATA commands being accepted finish, and returns; sessions still open
    are dropped with the loop (nothing of theirs was accepted). Cancellation drops everything;
    a commit in progress happens whole or not at all.
    """
    # Imported only here: importing trio_asyncio swaps asyncio's event loop policy for the
    # whole process, after which plain asyncio loops made in other threads (aiosmtpd's
    # Controller) no longer work. Only a process that serves SMTP should pay that.
    import trio_asyncio

    cert, key = await ensure_tls_material(config)
    tls_context = server_tls_context(cert, key)
    handler = SubmissionHandler(config, deps)

    def session_factory(*, implicit_tls: bool) -> Callable[[], SMTP]:
        def make() -> SMTP:
            return _SubmissionSMTP(
                handler,
                data_size_limit=config.smtp.max_message_size,
                hostname=config.delivery.helo_name,
                ident="Postwire ESMTP",
                # Implicit TLS: the socket already is TLS, so no STARTTLS and AUTH at once.
                tls_context=None if implicit_tls else tls_context,
                require_starttls=not implicit_tls,
                auth_require_tls=not implicit_tls,
                authenticator=handler.authenticator,
                loop=asyncio.get_running_loop(),
            )

        return make

    async with trio_asyncio.open_loop() as loop:
        servers: list[asyncio.Server] = []
        bound: dict[bool, list[tuple[str, int]]] = {False: [], True: []}
        listens = [(a, False) for a in config.smtp.starttls_listen]
        listens += [(a, True) for a in config.smtp.tls_listen]
        try:
            for address, implicit_tls in listens:
                host, port = split_host_port(address)
                create_server = trio_asyncio.aio_as_trio(loop.create_server)
                server = await create_server(
                    session_factory(implicit_tls=implicit_tls),
                    host,
                    port,
                    ssl=tls_context if implicit_tls else None,
                    reuse_address=True,
                )
                servers.append(server)
                bound[implicit_tls] += [s.getsockname()[:2] for s in server.sockets]
            task_status.started(SubmissionListeners(starttls=bound[False], tls=bound[True]))
            for host, port in bound[False]:
                log.info("SMTP submission (STARTTLS) on %s:%d", host, port)
            for host, port in bound[True]:
                log.info("SMTP submission (implicit TLS) on %s:%d", host, port)
            await deps.stopping.wait()
        finally:
            for server in servers:
                server.close()
        await handler.in_flight.idle.wait()
