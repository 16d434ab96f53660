"""The delivery engine: spooled messages to the recipients' mail servers.

One lease loop hands due messages (scheduled ones when their time comes, retries when theirs
does) to per-message tasks. A message's pending recipients are grouped by domain, each domain is
resolved to a site (its MX host set, or a route), and each site has its own pool of SMTP
connections, so a slow or tarpitting site only ever holds its own connections. Every outcome
is committed in one batch with its events (email.sent, email.delivered,
email.delivery_delayed, email.bounced), the email's `last_event`, new suppressions, and then
either the message's ack or its reschedule.

Crash safety: a message is leased while in hand; after a crash, `release_leases` at start makes
every unfinished message due again (at least once). Within a run, a message is never handed out
twice: the leases of messages in hand are renewed well before they expire, so no other process
sharing the spool takes one over; should a renewal come too late, the lease loop may hand the
message back to this engine, which keeps its task rather than deliver it twice.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

import trio

from postwire import _core
from postwire.concurrency import first_of
from postwire.delivery.bounces import Outcome, classify_failure, classify_reply, should_suppress
from postwire.delivery.pool_sizing import ideal_connection_count
from postwire.delivery.resolver import Destination, DestinationError, MxResolver
from postwire.delivery.retry_policy import next_attempt_at, stable_jitter
from postwire.delivery.sandbox import held_outcomes
from postwire.errors import DeliveryError, LeaseLostError, NoSuchMessageError, ProtocolError
from postwire.smtp.client_connection import (
    SmtpConnection,
    Timeouts,
    TlsPolicy,
    open_smtp_connection,
)
from postwire.store.deliveries import (
    DELIVERIES,
    SUPPRESSIONS,
    DeliveryRecord,
    add_event,
    is_suppressed,
    new_suppression,
    suppression_key,
)
from postwire.store.emails import EMAILS, email_key, next_last_event
from postwire.store.sandbox_inbox import hold_message
from postwire.store.spool import Spool
from postwire.config import process_count

if TYPE_CHECKING:
    from postwire.services import ServiceDeps
    from postwire.config import Config

log = logging.getLogger("postwire.delivery")

# A message is held this long per hand-out; renewed while still in hand.
LEASE_MS = 5 * 60 * 1000
# How often the leases of messages in hand are renewed (each for another LEASE_MS).
RENEW_EVERY_SECONDS = LEASE_MS / 1000 / 4
# The most messages in hand at once: the lease loop takes no more (backpressure).
MAX_MESSAGES_IN_HAND = 2000
# How often an idle lease loop looks for due messages it was not woken for.
IDLE_POLL_SECONDS = 0.5
# An idle pooled connection is closed after this long.
IDLE_CONNECTION_SECONDS = 10.0


@dataclass(slots=True)
class _Job:
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
        self.send, self.receive = trio.open_memory_channel[_Job](1_000_000)
        self.queued = 0
        self.workers = 0

    async def deliver(self, job: _Job) -> None:
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
            job: _Job | None = None
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


class DeliveryEngine:
    """Owns the lease loop, the per-message tasks and the site pools."""

    def __init__(
        self,
        config: Config,
        spool: Spool,
        resolver: MxResolver,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        connect: Callable[..., Awaitable[SmtpConnection]] = open_smtp_connection,
    ) -> None:
        self.config = config
        self.spool = spool
        self.resolver = resolver
        self.now = now
        self.connect = connect
        self.in_hand: dict[str, int] = {}  # message id -> its current lease token
        self.pools: dict[tuple[str, str, tuple[str, str] | None], SitePool] = {}
        self.wakeup = trio.Event()
        self.nursery: trio.Nursery | None = None

    def now_ms(self) -> int:
        return int(self.now().timestamp() * 1000)

    def wake(self) -> None:
        """New mail may be due: look now instead of at the next poll."""
        self.wakeup.set()

    async def recover(self) -> None:
        """Make every message leased by an earlier run due now (before any other process of
        this run delivers)."""
        batch = _core.WriteBatch()
        batch.release_leases(self.now_ms())
        await self.spool.commit(batch)

    async def run(self, stopping: trio.Event) -> None:
        """Lease and deliver until `stopping`; then let the messages in hand finish."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self._renew_leases)
            while not stopping.is_set():
                handed = await self._lease(nursery)
                if handed:
                    continue
                self.wakeup = trio.Event()
                next_due = self.spool.core.next_due_at()
                wait = IDLE_POLL_SECONDS
                if next_due is not None:
                    wait = min(wait, max(0.0, (next_due - self.now_ms()) / 1000))
                with trio.move_on_after(max(wait, 0.01)):
                    await first_of(self.wakeup.wait, stopping.wait)
            # Intake has stopped: finish what is in hand (the stage's deadline bounds it).
            while self.in_hand:
                await trio.sleep(0.05)
            nursery.cancel_scope.cancel()

    async def _lease(self, nursery: trio.Nursery) -> int:
        room = MAX_MESSAGES_IN_HAND - len(self.in_hand)
        if room <= 0:
            await trio.sleep(0.05)
            return 0
        batch = _core.WriteBatch()
        batch.lease_due(self.now_ms(), min(room, 500), LEASE_MS)
        handed = 0
        for leased in await self.spool.commit(batch):
            renewed = leased.id in self.in_hand
            self.in_hand[leased.id] = leased.lease
            if not renewed:  # an expired lease of a message still in hand: keep its task
                handed += 1
                nursery.start_soon(self._deliver_message, leased.id)
        return handed

    async def _renew_leases(self) -> None:
        """Keep the leases of messages in hand (waiting for a slow site, say) from running out."""
        while True:
            await trio.sleep(RENEW_EVERY_SECONDS)
            until_ms = self.now_ms() + LEASE_MS
            async with trio.open_nursery() as nursery:
                for message_id, lease in list(self.in_hand.items()):
                    nursery.start_soon(self._renew, message_id, lease, until_ms)

    async def _renew(self, message_id: str, lease: int, until_ms: int) -> None:
        # One batch per message: a message finished meanwhile must not spoil the others' renewal.
        batch = _core.WriteBatch()
        batch.renew(message_id, lease, until_ms)
        with contextlib.suppress(LeaseLostError, NoSuchMessageError):  # finished meanwhile
            await self.spool.commit(batch)

    async def _deliver_message(self, message_id: str) -> None:
        try:
            await self._attempt(message_id)
        except Exception:
            log.exception("delivery of %s failed; it will be retried after its lease", message_id)
        finally:
            self.in_hand.pop(message_id, None)

    async def _attempt(self, message_id: str) -> None:
        delivery = DELIVERIES.get(self.spool, message_id)
        body = self.spool.message_body(message_id)
        if delivery is None or body is None:
            log.warning("message %s has no delivery record or body; dropping it", message_id)
            await self._finish(message_id, None, final=True)
            return
        first_attempt = delivery.first_attempt_ms is None
        outcomes: dict[str, Outcome] = {}
        suppressed = [r for r in delivery.pending if is_suppressed(self.spool, delivery.team_id, r)]
        to_send = [r for r in delivery.pending if r not in suppressed]
        by_domain: dict[str, list[str]] = defaultdict(list)
        for address in to_send:
            by_domain[address.rpartition("@")[2].lower()].append(address)
        policy: TlsPolicy = "enforced" if delivery.tls == "enforced" else "opportunistic"

        async def deliver_domain(domain: str, recipients: list[str]) -> None:
            job = _Job(delivery.envelope_from, recipients, body, outcomes, trio.Event())
            try:
                destination = await self.resolver.resolve(domain)
            except DestinationError as exc:
                outcome = classify_failure(exc)
                for address in recipients:
                    outcomes[address] = outcome
                return
            await self._pool(destination, policy).deliver(job)

        if self.config.sandbox:  # nothing leaves the machine: the local inbox takes everyone
            outcomes.update(held_outcomes(to_send))
            by_domain.clear()
        if len(by_domain) == 1:  # the usual case: no nursery to pay for
            ((domain, recipients),) = by_domain.items()
            await deliver_domain(domain, recipients)
        elif by_domain:
            async with trio.open_nursery() as nursery:
                for domain, recipients in by_domain.items():
                    nursery.start_soon(deliver_domain, domain, recipients)
        await self._record(message_id, delivery, outcomes, suppressed, first_attempt)

    def _pool(self, destination: Destination, policy: TlsPolicy) -> SitePool:
        credentials = None
        if destination.routed:  # a route may name its own TLS policy and AUTH credentials
            delivery = self.config.delivery
            route_policy = delivery.route_tls_for(destination.domain)
            if route_policy in ("opportunistic", "enforced", "none"):
                policy = cast(TlsPolicy, route_policy)
            credentials = delivery.route_auth_for(destination.domain)
        key = (destination.site, policy, credentials)
        pool = self.pools.get(key)
        if pool is None:
            assert self.nursery is not None
            pool = SitePool(
                destination, policy, self.config, self.nursery, self.connect, credentials
            )
            self.pools[key] = pool
        return pool

    async def _record(
        self,
        message_id: str,
        delivery: DeliveryRecord,
        outcomes: dict[str, Outcome],
        suppressed: list[str],
        first_attempt: bool,
    ) -> None:
        """One commit: events, statuses, suppressions, and the ack or the retry."""
        now = self.now()
        now_ms = self.now_ms()
        team = delivery.team_id
        batch = _core.WriteBatch()
        if self.config.sandbox and outcomes:  # its bytes move to the inbox as the ack drops them
            hold_message(
                batch, self.spool, team, message_id, delivery.envelope_from, list(outcomes), now_ms
            )
        finished = dict(delivery.finished)
        last_event: str | None = None
        if first_attempt and outcomes:
            add_event(batch, team, message_id, "email.sent", now_ms)
            last_event = "sent"
        for address in suppressed:
            finished[address] = "suppressed"
            last_event = "suppressed"
        first_ms = delivery.first_attempt_ms if delivery.first_attempt_ms is not None else now_ms
        retry_at = next_attempt_at(
            datetime.fromtimestamp(first_ms / 1000, UTC),
            delivery.attempts + 1,
            now,
            max_age=timedelta(hours=self.config.delivery.max_age_hours),
            jitter=stable_jitter(message_id),
        )
        for address, outcome in outcomes.items():
            if outcome.status == "delivered":
                finished[address] = "delivered"
                add_event(batch, team, message_id, "email.delivered", now_ms, to=address)
                last_event = "delivered"
            elif outcome.status == "permanent" or retry_at is None:
                finished[address] = "bounced"
                add_event(
                    batch, team, message_id, "email.bounced", now_ms,
                    to=address, bounce=outcome.bounce(),
                )  # fmt: skip
                last_event = "bounced"
                if should_suppress(outcome):
                    SUPPRESSIONS.put(
                        batch,
                        suppression_key(team, address),
                        new_suppression(address, "bounce", now_ms, message_id),
                    )
            else:
                add_event(
                    batch, team, message_id, "email.delivery_delayed", now_ms,
                    to=address, diagnostic=outcome.diagnostic,
                )  # fmt: skip
                last_event = "delivery_delayed"
        updated = replace(
            delivery, finished=finished, first_attempt_ms=first_ms, attempts=delivery.attempts + 1
        )
        final = not updated.pending
        if final:
            DELIVERIES.delete(batch, message_id)
        else:
            DELIVERIES.put(batch, message_id, updated)
        key = email_key(team, message_id)
        async with self.spool.record_lock(key):
            record = EMAILS.get(self.spool, key)
            if last_event is not None and record is not None:
                event = next_last_event(record.last_event, last_event)
                EMAILS.put(batch, key, replace(record, last_event=event))
            await self._finish(message_id, batch, final=final, retry_at=retry_at)

    async def _finish(
        self,
        message_id: str,
        batch: _core.WriteBatch | None,
        *,
        final: bool,
        retry_at: datetime | None = None,
    ) -> None:
        batch = batch if batch is not None else _core.WriteBatch()
        lease = self.in_hand.get(message_id, 0)
        if final:
            batch.ack(message_id, lease)
        else:
            assert retry_at is not None
            due_ms = int(retry_at.timestamp() * 1000)
            batch.reschedule(message_id, due_ms, self.now_ms(), lease=lease, count_attempt=True)
        try:
            await self.spool.commit(batch)
        except (LeaseLostError, NoSuchMessageError):
            # Taken over (another process) or removed meanwhile: its new holder records it.
            log.warning("lost the lease of %s before recording its outcome", message_id)


def connections_per_process(config: Config) -> int:
    """This process's share of `delivery.max_connections_per_site` (at least one)."""
    return max(1, config.delivery.max_connections_per_site // process_count(config))


async def serve_delivery(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[DeliveryEngine] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Deliver spooled mail until the stage stops.

    Owns the lease loop and every site's connections. On start, in the first process, it
    releases earlier runs' leases (at least once after a crash); workers start after it.
    When `deps.stopping` is set it leases nothing more and finishes the messages in hand;
    cancelled, it abandons them, and their leases bring them back.
    """
    engine = DeliveryEngine(config, deps.spool, MxResolver(config))
    if deps.process_index == 0:
        await engine.recover()
    task_status.started(engine)
    await engine.run(deps.stopping)
