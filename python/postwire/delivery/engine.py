"""The delivery engine: spooled messages to the recipients' mail servers.

One lease loop hands due messages (scheduled ones when their time comes, retries when theirs
does) to per-message tasks. A message's pending recipients are grouped by domain, each domain is
resolved to a site (its MX host set, or a route), checked against the destination policy (no
loopback, private or own addresses unless routed there), and each site has its own pool of SMTP
connections (`site_pool.py`). Every outcome is committed in one batch with its events
(email.sent, email.delivered, email.delivery_delayed, email.bounced), the email's `last_event`,
new suppressions, the attempt's record (`GET /emails/{id}` shows it), and then either the
message's ack or its reschedule. A message for several domains commits each domain's finished
recipients as soon as that domain has answered, not when the slowest one does.

Crash safety: a message is leased while in hand; after a crash, `release_leases` at start makes
every unfinished message due again (at least once: a recipient whose server said 250 just
before the crash, with the outcome not yet committed, gets the message again; the window is
the group commit's). The spool counts hand-outs, so the redelivery is recorded as a new attempt
after an interrupted one. Within a run, a message is never handed out twice: the leases of
messages in hand are renewed well before they expire, so no other process sharing the spool
takes one over; should a renewal come too late, the lease loop may hand the message back to this
engine, which keeps its task rather than deliver it twice.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

import trio

from postwire import _core
from postwire.concurrency import first_of
from postwire.delivery.bounces import Outcome, classify_failure
from postwire.delivery.destination_policy import guard_destination, own_addresses
from postwire.delivery.insights_copies import InsightsCopies
from postwire.delivery.outcome_events import add_outcomes
from postwire.delivery.resolver import Destination, DestinationError, MxResolver
from postwire.delivery.retry_policy import next_attempt_at, stable_jitter
from postwire.delivery.sandbox import complainants, report_complaints, sandbox_outcomes
from postwire.delivery.site_pool import Job, SitePool
from postwire.errors import (
    DestinationRefused,
    LeaseLostError,
    NoSuchMessageError,
    SpoolFullError,
    StoreUnavailableError,
)
from postwire.metrics.operator_registry import (
    OPERATOR_METRICS,
    RETRY_BACKLOG_KEY,
    retry_destination_changes,
    retry_destination_key,
)
from postwire.smtp.client_connection import SmtpConnection, TlsPolicy, open_smtp_connection
from postwire.store.broadcasts import add_count
from postwire.store.deliveries import (
    ATTEMPTS,
    DELIVERIES,
    AttemptRecord,
    DeliveryRecord,
    attempt_key,
    suppressed_among,
)
from postwire.store.emails import EMAILS, email_key, record_last_event
from postwire.store.guards import never_after_change
from postwire.store.metric_counters import add_count as add_metric_count
from postwire.store.outages import Outage
from postwire.store.retry_waiting import mark_waiting
from postwire.store.sandbox_inbox import hold_message
from postwire.store.spool import Spool

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.services import ServiceDeps

log = logging.getLogger("postwire.delivery")

# A message is held this long per hand-out; renewed while still in hand.
LEASE_MS = 5 * 60 * 1000
# How often the leases of messages in hand are renewed (each for another LEASE_MS).
RENEW_EVERY_SECONDS = LEASE_MS / 1000 / 4
# The most messages in hand at once: the lease loop takes no more (backpressure).
MAX_MESSAGES_IN_HAND = 2000
# How often an idle lease loop looks for due messages it was not woken for.
IDLE_POLL_SECONDS = 0.5
# How long a commit refused by a full spool waits before it is tried again.
FULL_SPOOL_RETRY_SECONDS = 1.0


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
        # Message id -> hand-outs of a message already in hand (a renewal came too late): the
        # attempt in progress covers them, so they are not reported as interrupted attempts.
        self.handed_again: dict[str, int] = {}
        self.pools: dict[tuple[str, str, tuple[str, str] | None], SitePool] = {}
        self.wakeup = trio.Event()
        self.nursery: trio.Nursery | None = None
        self.own_addresses = own_addresses(config.delivery.sending_ips)
        self.insights_copies = InsightsCopies(config, spool)
        # The table store unreachable: reads wait for it, outcomes are kept until it is back.
        self.outage = Outage("delivery")

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
                next_due = self.spool.next_due_at()
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
        now_ms = self.now_ms()
        batch.lease_due(now_ms, min(room, 500), LEASE_MS)
        try:
            handed_out = await self.spool.commit(batch)
        except SpoolFullError:  # the map's very end: acks in flight make room again
            log.error("the spool is full: cannot lease messages; retrying")
            await trio.sleep(FULL_SPOOL_RETRY_SECONDS)
            return 0
        handed = 0
        for leased in handed_out:
            renewed = leased.id in self.in_hand
            self.in_hand[leased.id] = leased.lease
            if renewed:  # an expired lease of a message still in hand: keep its task
                self.handed_again[leased.id] = self.handed_again.get(leased.id, 0) + 1
            else:
                handed += 1
                nursery.start_soon(self._deliver_message, leased, now_ms)
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

    async def _deliver_message(self, leased: _core.Leased, started_ms: int) -> None:
        try:
            await self._attempt(leased, started_ms)
        except Exception:
            log.exception("delivery of %s failed; it will be retried after its lease", leased.id)
        finally:
            self.in_hand.pop(leased.id, None)
            self.handed_again.pop(leased.id, None)

    async def _attempt(self, leased: _core.Leased, started_ms: int) -> None:
        message_id = leased.id
        delivery = DELIVERIES.get(self.spool, message_id)
        body = self.spool.message_body(message_id)
        if delivery is None or body is None:
            log.warning("message %s has no delivery record or body; dropping it", message_id)
            batch = _core.WriteBatch()
            self._end_lease(batch, message_id, retry_at=None)
            await self._commit_outcome(message_id, None, batch, None)
            return
        if leased.deliveries > delivery.attempts + 1:
            log.warning(
                "delivering %s again: an earlier attempt was interrupted (a lease expired or "
                "the service restarted) before its outcome was recorded", message_id,
            )  # fmt: skip
        attempt = _Attempt(leased.deliveries, started_ms, leased.enqueued_at_ms, delivery, body)
        # A team's suppression list is for the team's own mail, not the instance's system mail.
        # Suppressions are in the table store: an address is not sent to without knowing.
        suppressed = (
            []
            if delivery.is_system
            else await self.outage.retry(
                lambda: suppressed_among(self.spool, delivery.team_id, delivery.pending)
            )
        )
        to_send = [r for r in delivery.pending if r not in suppressed]
        by_domain: dict[str, list[str]] = defaultdict(list)
        for address in to_send:
            by_domain[address.rpartition("@")[2].lower()].append(address)
        policy: TlsPolicy = "enforced" if delivery.tls == "enforced" else "opportunistic"

        async def deliver_domain(domain: str, recipients: list[str]) -> None:
            outcomes: dict[str, Outcome] = {}
            job = Job(delivery.envelope_from, recipients, body, outcomes, trio.Event())
            OPERATOR_METRICS.destination_taken(domain, message_id, leased.enqueued_at_ms)
            try:
                destination = self._guarded(await self.resolver.resolve(domain))
            except (DestinationError, DestinationRefused) as exc:
                outcomes.update(dict.fromkeys(recipients, classify_failure(exc)))
            else:
                await self._pool(destination, policy).deliver(job)
            finally:
                OPERATOR_METRICS.destination_done(domain, message_id)
            OPERATOR_METRICS.count_outcomes(outcomes.values())
            attempt.outcomes.update(outcomes)
            if len(by_domain) > 1:
                # Recipients done with for good are recorded now, not when the slowest of the
                # message's domains answers: a crash meanwhile would deliver to them again.
                await self._record_finished(message_id, attempt, outcomes)

        if self.config.sandbox:  # nothing leaves the machine: the sandbox answers for everyone
            outcomes = sandbox_outcomes(to_send)
            OPERATOR_METRICS.count_outcomes(outcomes.values())
            attempt.outcomes.update(outcomes)
            by_domain.clear()
        if len(by_domain) == 1:  # the usual case: no nursery to pay for
            ((domain, recipients),) = by_domain.items()
            await deliver_domain(domain, recipients)
        elif by_domain:
            async with trio.open_nursery() as nursery:
                for domain, recipients in by_domain.items():
                    nursery.start_soon(deliver_domain, domain, recipients)
        await self._record(message_id, attempt, suppressed)
        if self.config.sandbox and (complaining := complainants(attempt.outcomes)):
            # As a mailbox provider's feedback loop would, once the message reached them.
            await report_complaints(
                self.spool, self.config, delivery.envelope_from, complaining, self.now_ms()
            )

    def _guarded(self, destination: Destination) -> Destination:
        """The destination's addresses the engine may connect to (routes are the operator's:
        trusted); raises `DestinationRefused` when none is left."""
        if destination.routed or self.config.delivery.allow_private_destinations:
            return destination
        return guard_destination(destination, self.own_addresses)

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

    async def _record_finished(
        self, message_id: str, attempt: _Attempt, outcomes: dict[str, Outcome]
    ) -> None:
        """Commit the recipients of `outcomes` that are finished (delivered, or bounced for
        good) while the message's other recipients are still being tried. The batch renews
        the lease, so it is refused if the lease was lost."""
        finished = {a: o for a, o in outcomes.items() if o.status in ("delivered", "permanent")}
        if not finished:
            return
        async with attempt.lock:
            before = attempt.delivery
            while True:
                now_ms = self.now_ms()
                batch = _core.WriteBatch()
                attempt.delivery, last_event = add_outcomes(
                    batch, message_id, attempt.delivery, finished, None, now_ms
                )
                DELIVERIES.put(batch, message_id, attempt.delivery)
                batch.renew(message_id, self.in_hand.get(message_id, 0), now_ms + LEASE_MS)
                if await self._commit_outcome(message_id, before, batch, last_event):
                    break
                attempt.delivery = before
                await trio.sleep(FULL_SPOOL_RETRY_SECONDS)
            attempt.recorded.update(finished)

    async def _record(self, message_id: str, attempt: _Attempt, suppressed: list[str]) -> None:
        """One commit: the attempt, its events, statuses, suppressions, and the ack or the
        retry (recipients `_record_finished` committed already are not repeated)."""
        async with attempt.lock:
            before = attempt.delivery
            while not await self._record_once(message_id, attempt, suppressed):
                attempt.delivery = before
                await trio.sleep(FULL_SPOOL_RETRY_SECONDS)

    async def _record_once(self, message_id: str, attempt: _Attempt, suppressed: list[str]) -> bool:
        now = self.now()
        now_ms = self.now_ms()
        delivery = attempt.delivery
        team = delivery.team_id
        batch = _core.WriteBatch()
        outcomes = {a: o for a, o in attempt.outcomes.items() if a not in attempt.recorded}
        held = [address for address, outcome in outcomes.items() if outcome.status == "delivered"]
        if self.config.sandbox and held:  # its bytes move to the inbox as the ack drops them
            hold_message(batch, self.spool, team, message_id, delivery.envelope_from, held, now_ms)
        first_ms = delivery.first_attempt_ms if delivery.first_attempt_ms is not None else now_ms
        retry_at = next_attempt_at(
            datetime.fromtimestamp(first_ms / 1000, UTC),
            delivery.attempts + 1,
            now,
            max_age=timedelta(hours=self.config.delivery.max_age_hours),
            jitter=stable_jitter(message_id),
        )
        attempt.delivery, last_event = add_outcomes(
            batch, message_id, attempt.delivery, outcomes, retry_at, now_ms
        )
        if suppressed:
            if delivery.broadcast_id is not None:  # suppressed after the walk enqueued it
                add_count(batch, team, delivery.broadcast_id, "suppressed", len(suppressed))
            add_metric_count(
                batch, team, delivery.domain_id, "suppressed", now_ms, len(suppressed),
                broadcast_id=delivery.broadcast_id, tags=tuple(delivery.tags),
            )  # fmt: skip
            finished = attempt.delivery.finished | dict.fromkeys(suppressed, "suppressed")
            attempt.delivery = replace(attempt.delivery, finished=finished)
            if last_event in (None, "sent"):
                last_event = "suppressed"
        updated = replace(
            attempt.delivery, first_attempt_ms=first_ms, attempts=delivery.attempts + 1
        )
        covered = 1 + self.handed_again.get(message_id, 0)
        if not delivery.is_system:  # the attempts are shown with the email; system mail has none
            ATTEMPTS.put(
                batch,
                attempt_key(team, message_id, attempt.number),
                attempt.record(now_ms, covered, suppressed),
            )
        final = not updated.pending
        kept = 0
        if final:
            DELIVERIES.delete(batch, message_id)
            kept = self.insights_copies.keep(batch, delivery, message_id, attempt.body)
        else:
            DELIVERIES.put(batch, message_id, updated)
        if final != (delivery.attempts == 0):  # it enters retry (first failure) or leaves it
            batch.add_counter("counters", RETRY_BACKLOG_KEY, -1 if final else 1)
        waiting_before = delivery.pending if delivery.attempts else []
        waiting_after = [] if final else updated.pending
        for domain, delta in retry_destination_changes(waiting_before, waiting_after):
            batch.add_counter("counters", retry_destination_key(domain), delta)
            mark_waiting(batch, domain, attempt.enqueued_ms, message_id, waiting=delta > 0)
        self._end_lease(batch, message_id, retry_at=None if final else retry_at)
        try:
            return await self._commit_outcome(message_id, delivery, batch, last_event)
        finally:
            self.insights_copies.settled(kept)

    def _end_lease(
        self, batch: _core.WriteBatch, message_id: str, *, retry_at: datetime | None
    ) -> None:
        """Add the message's ack (no `retry_at`: it is finished) or its reschedule to `batch`."""
        lease = self.in_hand.get(message_id, 0)
        if retry_at is None:
            batch.ack(message_id, lease)
        else:
            due_ms = int(retry_at.timestamp() * 1000)
            batch.reschedule(message_id, due_ms, self.now_ms(), lease=lease, count_attempt=True)

    async def _commit_outcome(
        self,
        message_id: str,
        delivery: DeliveryRecord | None,
        batch: _core.WriteBatch,
        last_event: str | None,
    ) -> bool:
        """Commit `batch` with the email's new `last_event`, guarded by the email record's key.

        False when the spool was full or the table store unreachable: the caller tries again
        (its message stays in hand, so its lease is renewed meanwhile) rather than let the
        outcome of a delivered message go, which would deliver it again when its lease ran
        out. (Intake leaves a reserve of the spool that these commits may use, so a full
        spool is rare.)
        """
        try:
            committed = await self._commit_outcome_once(message_id, delivery, batch, last_event)
        except StoreUnavailableError as error:
            self.outage.failed(error)
            return False
        if committed:
            self.outage.succeeded()
        return committed

    async def _commit_outcome_once(
        self,
        message_id: str,
        delivery: DeliveryRecord | None,
        batch: _core.WriteBatch,
        last_event: str | None,
    ) -> bool:
        if delivery is None or delivery.is_system:  # system mail has no email record
            return await self._commit(message_id, batch)
        key = email_key(delivery.team_id, message_id)
        async for attempt in self.spool.guarded(key):
            with attempt:
                # A copy: a commit consumes its batch, and a conflict runs this again.
                guarded = batch.copy()
                record = await EMAILS.aget(self.spool, key)
                if last_event is not None and record is not None:
                    record_last_event(guarded, record, last_event)
                return await self._commit(message_id, guarded)
        never_after_change()

    async def _commit(self, message_id: str, batch: _core.WriteBatch) -> bool:
        try:
            await self.spool.commit(batch)
        except (LeaseLostError, NoSuchMessageError):
            # Taken over (another process) or removed meanwhile: its new holder records it.
            log.warning("lost the lease of %s before recording its outcome", message_id)
        except SpoolFullError:
            log.error("the spool is full: the outcome of %s waits for room", message_id)
            return False
        return True


@dataclass(slots=True)
class _Attempt:
    """One hand-out of a message being delivered: what it has learnt so far."""

    number: int  # the hand-out's number: the spool's count of hand-outs, this one included
    started_ms: int
    enqueued_ms: int  # when the message entered the spool (its retry rows are kept under it)
    delivery: DeliveryRecord  # as it will be once what is recorded so far commits
    body: bytes  # the message as spooled
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    recorded: set[str] = field(default_factory=set)  # committed by `_record_finished`
    lock: trio.Lock = field(default_factory=trio.Lock)

    def record(self, now_ms: int, covered: int, suppressed: list[str]) -> AttemptRecord:
        """The attempt as the email's history keeps it, once `delivery` has its outcomes."""
        finished = self.delivery.finished
        recipients: dict[str, dict[str, str | None]] = {
            address: {
                "status": finished.get(address, "delivery_delayed"),
                "diagnostic": outcome.diagnostic,
            }
            for address, outcome in self.outcomes.items()
        }
        for address in suppressed:
            recipients[address] = {"status": "suppressed", "diagnostic": None}
        return AttemptRecord(self.number, self.started_ms, now_ms, covered, recipients)


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
        if config.delivery.allow_private_destinations:
            log.warning(
                "delivery.allow_private_destinations is on: MX records may lead Postwire to "
                "loopback, private and its own addresses (meant for tests and labs only)"
            )
        await engine.recover()
    task_status.started(engine)
    await engine.run(deps.stopping)
