"""Per-site pools of outbound SMTP connections: a slow or tarpitting site holds only its own.

A site is a recipient domain's MX host set, or a route. Each pool opens at most its process's
share of `delivery.max_connections_per_site`, as many as its queue depth calls for, and carries
many messages over each connection; workers end when idle or when their connection fails.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from postwire.config import process_count
from postwire.delivery.bounces import Outcome, classify_failure, classify_reply
from postwire.delivery.pool_sizing import ideal_connection_count
from postwire.delivery.resolver import Destination, DestinationError
from postwire.errors import DeliveryError, ProtocolError
from postwire.smtp.client_connection import (
    SmtpConnection,
    Timeouts,
    TlsPolicy,
    open_smtp_connection,
)

if TYPE_CHECKING:
    from postwire.config import Config

# An idle pooled connection is closed after this long.
IDLE_CONNECTION_SECONDS = 10.0


@dataclass(slots=True)
class Job:
    """Some recipients of one message for one site, and where their outcomes go."""

    envelope_from: str
    recipients: list[str]
    body: bytes
    outcomes: dict[str, Outcome]
    done: trio.Event


class SitePool:
    """The SMTP connections to one site: at most `max_connections`, as many as its queue
    depth calls for, each carrying many messages. Workers end when idle or when their
    connection fails; the pool starts new ones as jobs arrive."""

    def __init__(
        self,
        destination: Destination,
        tls_policy: TlsPolicy,
        config: Config,
        nursery: trio.Nursery,
        connect: Callable[..., Awaitable[SmtpConnection]] = open_smtp_connection,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.destination = destination
        self.tls_policy = tls_policy
        self.credentials = credentials
        self.config = config
        self.nursery = nursery
        self.connect = connect
        # The limit is the service's: each process of `processes` takes its share.
        self.max_connections = connections_per_process(config)
        self.send, self.receive = trio.open_memory_channel[Job](1_000_000)
        self.queued = 0
        self.workers = 0

    async def deliver(self, job: Job) -> None:
        self.queued += 1
        self.send.send_nowait(job)
        self._staff()
        await job.done.wait()

    def _staff(self) -> None:
        """Start workers up to what the queue depth calls for."""
        wanted = ideal_connection_count(self.queued, max_connections=self.max_connections)
        while self.workers < wanted:
            self.workers += 1
            self.nursery.start_soon(self._work)

    async def _open(self) -> SmtpConnection:
        """Connect to the site's addresses in order until one answers."""
        failure: BaseException | None = None
        for host in self.destination.hosts:
            for address in host.addresses or (host.name,):
                try:
                    connection = await self.connect(
                        host.name,
                        host.port,
                        helo_name=self.config.delivery.helo_name,
                        tls_policy=self.tls_policy,
                        timeouts=Timeouts(),
                        connect_address=address,
                        credentials=self.credentials,
                    )
                    return connection
                except DeliveryError as exc:
                    failure = exc
                    if not exc.transient:  # e.g. TLS enforced and refused: no other host helps
                        raise
        raise failure or DestinationError(self.destination.domain, "no address to connect to")

    async def _work(self) -> None:
        connection: SmtpConnection | None = None
        restaff = False
        try:
            job: Job | None = None
            with trio.move_on_after(IDLE_CONNECTION_SECONDS):
                job = await self.receive.receive()
            while job is not None:
                self.queued -= 1
                try:
                    if connection is None or not connection.usable:
                        connection = await self._open()
                    transaction = await connection.send_message(
                        job.envelope_from, job.recipients, job.body
                    )
                    for address, reply in transaction.outcomes():
                        job.outcomes[address] = classify_reply(
                            reply.code, reply.enhanced, reply.text
                        )
                    for address, refusal in transaction.refused_locally:  # never offered
                        job.outcomes[address] = classify_failure(refusal)
                    unanswered = classify_failure(ProtocolError("no reply for the recipient"))
                    for address in job.recipients:
                        job.outcomes.setdefault(address, unanswered)
                except (DeliveryError, DestinationError, OSError) as exc:
                    outcome = classify_failure(exc)
                    for address in job.recipients:
                        job.outcomes.setdefault(address, outcome)
                    connection = None  # a failed connection is not reused
                finally:
                    job.done.set()
                job = None
                if connection is None:
                    restaff = True
                    return
                try:  # under load the next job is waiting: no timeout scope to pay for
                    job = self.receive.receive_nowait()
                except trio.WouldBlock:
                    with trio.move_on_after(IDLE_CONNECTION_SECONDS):
                        job = await self.receive.receive()
        finally:
            self.workers -= 1
            if restaff:  # gave up on a failed connection: queued jobs still need a worker
                self._staff()
            if connection is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await connection.quit()


def connections_per_process(config: Config) -> int:
    """This process's share of `delivery.max_connections_per_site` (at least one)."""
    return max(1, config.delivery.max_connections_per_site // process_count(config))
