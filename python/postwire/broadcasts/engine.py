"""The broadcast engine: durable jobs that walk a segment and enqueue its messages.

A broadcast that is due (queued, or scheduled and its time come) has an entry in the due index.
The engine walks its segment's members in key order, a page at a time: it skips (and counts)
members who unsubscribed, opted out of the broadcast's topic or whose address is suppressed,
personalizes the others' messages (placeholders, their own unsubscribe link and the
`List-Unsubscribe` fields, which the DKIM signature covers), builds and signs them through the
`Acceptor`, and commits in one batch the page's messages and email records, what became of each
member, the counts, and the broadcast's cursor: the last member done. After kill -9 the walk
resumes after the cursor, so no member is mailed twice and none is skipped. The last page
marks the broadcast sent and removes its due entry.

Only a few pages are ever in memory: a turn keeps `PAGES_IN_FLIGHT` of them going at once,
built one after the other on the event loop's thread and each signed in worker threads (RSA
releases the GIL) while the next is built, and commits them in order. Pages are paced
(`broadcasts.rate` messages a second across all broadcasts), several due broadcasts take turns,
and the walk yields to the event loop every few members and builds a few messages at a time, so
the API's own sends keep their latency. A cancel (guarded by the broadcast's key) stops the
walk: pages prepared meanwhile are dropped, not committed. A broadcast whose turn fails is
logged and tried again later; it never stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import trio

from postwire import _core
from postwire.accept import Acceptor, Draft, PreparedEmail
from postwire.broadcasts.messages import BroadcastContent, compile_broadcast
from postwire.broadcasts.rules import next_page_at, skip_reason, topic_subscription
from postwire.compose.addresses import recipient_problem
from postwire.compose.request import SendRequest
from postwire.config import Config
from postwire.domains.store import DomainRecord, find_verified_domain_for_sender
from postwire.errors import ApiError, SpoolFullError, StoreUnavailableError
from postwire.metrics.operator_registry import OPERATOR_METRICS
from postwire.services import ServiceDeps, Wakeable
from postwire.store.accounts import contract_timestamp
from postwire.store.broadcasts import (
    BROADCAST_DUE,
    PENDING_STATUSES,
    BroadcastRecord,
    ContactOutcome,
    DueEntry,
    add_contact_outcome,
    add_count,
    broadcast_key,
    due_entries,
    due_key,
    get_broadcast,
    put_broadcast,
    set_due,
)
from postwire.store.contact_properties import team_properties
from postwire.store.contacts import ContactRecord, get_contact
from postwire.store.deliveries import is_suppressed
from postwire.store.metric_counters import add_count as add_metric_count
from postwire.store.outages import Outage
from postwire.store.segments import segment_members
from postwire.store.spool import Spool
from postwire.store.topics import get_topic
from postwire.templates.placeholders import contact_values
from postwire.unsubscribe.links import BroadcastLinks, load_unsubscribe_secret
from postwire.webhooks.tracking import Tracking

log = logging.getLogger("postwire.broadcasts")

# How often an idle engine looks for broadcasts that came due.
IDLE_POLL_SECONDS = 0.2
# Due broadcasts taking turns.
TURNS_AT_ONCE = 8
# How long a broadcast waits when it cannot go on now (its domain unverified, a full spool).
RETRY_SECONDS = 60.0
# Members prepared between two checkpoints, where the API's requests get their turn.
MEMBERS_BETWEEN_CHECKPOINTS = 8
# Pages of one broadcast prepared at once: one committing, one signing and one being built (one
# at a time, so that a page built goes to signing as soon as it can), and walked in one turn
# before the next due broadcast's.
PAGES_IN_FLIGHT = 3
PAGES_A_TURN = 25


@dataclass(frozen=True, slots=True)
class _Walk:
    """What a broadcast's walk reads once per run: its compiled content, its links maker,
    its topic's default and the team's property fallbacks."""

    content: BroadcastContent
    links: BroadcastLinks
    topic_default: str | None
    fallbacks: Mapping[str, object]


@dataclass(slots=True, eq=False)
class _Flight:
    """A page of a walk: the members after `after` (the cursor before it), and once prepared
    its signed messages and what became of each member."""

    after: str | None
    members: list[str]
    finished: bool  # the segment's last page
    ready: trio.Event = field(default_factory=trio.Event)
    result: _Page | None = None

    async def page(self) -> _Page:
        await self.ready.wait()
        assert self.result is not None
        return self.result


@dataclass(slots=True)
class _Page:
    """A page prepared: the signed messages and what became of each member walked."""

    flight: _Flight
    prepared: list[PreparedEmail]
    outcomes: list[tuple[str, ContactOutcome]]


class BroadcastEngine:
    """Owns the walks of due broadcasts (in the first process only)."""

    def __init__(
        self,
        config: Config,
        spool: Spool,
        *,
        delivery: Wakeable | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.config = config
        self.spool = spool
        self.delivery = delivery
        self.now = now
        self.acceptor = Acceptor(spool, tracking=Tracking(spool, config.api.public_url))
        self.walks: dict[str, _Walk] = {}
        # Builds share the event loop's thread: two at once would both finish late.
        self.building = trio.Lock()
        self.next_page_at = 0.0  # trio clock

    def now_ms(self) -> int:
        return int(self.now().timestamp() * 1000)

    async def run(self, stopping: trio.Event) -> None:
        """Walk due broadcasts until `stopping`; a page in hand is finished first."""
        outage = Outage("broadcasts")
        while not stopping.is_set():
            try:
                turned = await self.take_turns(stopping)
            except StoreUnavailableError as error:  # walks resume from their cursors
                await outage.wait(error, stopping)
                continue
            outage.succeeded()
            if not turned:
                with trio.move_on_after(IDLE_POLL_SECONDS):
                    await stopping.wait()

    async def take_turns(self, stopping: trio.Event | None = None) -> bool:
        """A turn of each due broadcast (up to `TURNS_AT_ONCE`); False if none was due."""
        now_ms = self.now_ms()
        due = [(at, e) for at, e in due_entries(self.spool, limit=TURNS_AT_ONCE) if at <= now_ms]
        for at, entry in due:
            if stopping is not None and stopping.is_set():
                break
            try:
                await self.take_turn(at, entry)
            except StoreUnavailableError:  # no broadcast's failure: every one waits
                raise
            except Exception:  # one broadcast's failure must not stop the others
                log.exception("broadcast %s failed; it is tried again later", entry.broadcast_id)
                record = get_broadcast(self.spool, entry.team_id, entry.broadcast_id)
                if record is not None:
                    await self._postpone(record)
        return bool(due)

    async def take_turn(self, due_at_ms: int, entry: DueEntry) -> int:
        """Walk up to `PAGES_A_TURN` pages of a due broadcast; return the messages enqueued.

        Pages are pipelined: while one page's messages are signed (in worker threads) or
        committed, the next ones are read and built, and they commit in order."""
        record = get_broadcast(self.spool, entry.team_id, entry.broadcast_id)
        if record is None or record.status not in PENDING_STATUSES:
            await self._drop_due(due_at_ms, entry)  # deleted or canceled meanwhile
            return 0
        try:
            domain = self.acceptor.sending_domain(record.team_id, None, _sender_domain(record))
            walk = self.walks.get(record.id) or await self._start_walk(record, domain)
        except ApiError as refusal:
            log.warning("broadcast %s waits: %s", record.id, refusal.message)
            await self._postpone(record)
            return 0
        self.walks[record.id] = walk
        enqueued = 0
        send_channel, receive_channel = trio.open_memory_channel[_Flight](PAGES_IN_FLIGHT - 1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._launch_pages, nursery, record, walk, send_channel)
            async with receive_channel:
                async for flight in receive_channel:
                    page = await flight.page()
                    try:
                        committed = await self._commit_page(record, page)
                    except SpoolFullError:
                        log.warning("the spool is full: broadcast %s waits", record.id)
                        await self._postpone(record)
                        committed = False
                    if not committed:  # canceled meanwhile: pages in flight are dropped
                        break
                    enqueued += len(page.prepared)
                    if page.prepared and self.delivery is not None:
                        self.delivery.wake()
                    self.next_page_at = next_page_at(
                        self.next_page_at, trio.current_time(), len(page.prepared),
                        self.config.broadcasts.rate,
                    )  # fmt: skip
                    await trio.sleep_until(self.next_page_at)
            nursery.cancel_scope.cancel()
        return enqueued

    async def _launch_pages(
        self,
        nursery: trio.Nursery,
        record: BroadcastRecord,
        walk: _Walk,
        channel: trio.MemorySendChannel[_Flight],
    ) -> None:
        """Read the members of the turn's pages, each after the one before, and start
        preparing each; the channel's room bounds the pages in flight."""
        page_size = self.config.broadcasts.page_size
        async with channel:
            after = record.cursor
            for _ in range(PAGES_A_TURN):
                members = segment_members(
                    self.spool, record.team_id, record.segment_id,
                    after_contact_id=after, limit=page_size,
                )  # fmt: skip
                flight = _Flight(after, members, finished=len(members) < page_size)
                await channel.send(flight)
                nursery.start_soon(self._fill, record, walk, flight)
                if flight.finished:
                    return
                after = members[-1]

    async def _fill(self, record: BroadcastRecord, walk: _Walk, flight: _Flight) -> None:
        flight.result = await self._prepare_page(record, walk, flight)
        flight.ready.set()

    async def _start_walk(self, record: BroadcastRecord, domain: DomainRecord) -> _Walk:
        secret = await load_unsubscribe_secret(self.spool)
        links = BroadcastLinks(
            secret, self.config.api.public_url, record.team_id, record.id, domain.return_path_host
        )
        topic_default = None
        if record.topic_id is not None:
            topic = get_topic(self.spool, record.team_id, record.topic_id)
            topic_default = None if topic is None else topic.default_subscription
        properties = team_properties(self.spool, record.team_id)
        fallbacks = {key: prop.fallback_value for key, prop in properties.items()}
        return _Walk(compile_broadcast(record), links, topic_default, fallbacks)

    async def _prepare_page(self, record: BroadcastRecord, walk: _Walk, flight: _Flight) -> _Page:
        async with self.building:
            owners, outcomes, built = await self._build_page(record, walk, flight)
        prepared: list[PreparedEmail] = []
        for (contact_id, address), result in zip(
            owners, await self.acceptor.sign_built(built), strict=True
        ):
            if isinstance(result, ApiError):
                log.warning("broadcast %s: no message for %s: %s", record.id, address, result)
                outcomes.append((contact_id, ContactOutcome(address, "failed")))
            else:
                prepared.append(result)
                outcomes.append((contact_id, ContactOutcome(address, "queued", result.record.id)))
        return _Page(flight, prepared, outcomes)

    async def _build_page(
        self, record: BroadcastRecord, walk: _Walk, flight: _Flight
    ) -> tuple[list[tuple[str, str]], list[tuple[str, ContactOutcome]], list[Draft | ApiError]]:
        """The page's members skipped (their outcomes) and the others' messages built: who
        each message is for (contact id, address) and its draft or refusal."""
        team = record.team_id
        requests: list[SendRequest] = []
        owners: list[tuple[str, str]] = []  # (contact id, address) of each request
        outcomes: list[tuple[str, ContactOutcome]] = []
        for index, contact_id in enumerate(flight.members):
            if index % MEMBERS_BETWEEN_CHECKPOINTS == 0:
                await trio.lowlevel.checkpoint()
            contact = get_contact(self.spool, team, contact_id)
            if contact is None:  # deleted since it was read as a member
                continue
            reason = self._skip_reason(record, walk, contact)
            if reason is None and recipient_problem(contact.email) is not None:
                reason = "failed"
            if reason is not None:
                outcomes.append((contact_id, ContactOutcome(contact.email, reason)))
                continue
            links = walk.links.for_contact(contact_id)
            values = contact_values(
                contact.email, contact.first_name, contact.last_name, contact.properties,
                walk.fallbacks, links.url,
            )  # fmt: skip
            requests.append(walk.content.request_for(contact.email, values, links.headers))
            owners.append((contact_id, contact.email))
        return owners, outcomes, await self._build(team, requests)

    def _skip_reason(
        self, record: BroadcastRecord, walk: _Walk, contact: ContactRecord
    ) -> str | None:
        topic = None
        if record.topic_id is not None:
            topic = topic_subscription(contact.topics, record.topic_id, walk.topic_default)
        return skip_reason(
            unsubscribed=contact.unsubscribed,
            topic_subscription=topic,
            suppressed=is_suppressed(self.spool, record.team_id, contact.email),
        )

    async def _build(self, team_id: str, requests: Sequence[SendRequest]) -> list[Draft | ApiError]:
        """Build the page's messages on the event loop (which runs other tasks every few
        builds). A message that cannot be built (a value the MIME builder refuses) is its own
        error, not the page's."""
        now = self.now()
        try:
            return await self.acceptor.build_many(team_id, None, requests, now)
        except ApiError:
            results: list[Draft | ApiError] = []
            for request in requests:
                try:
                    results += await self.acceptor.build_many(team_id, None, [request], now)
                except ApiError as refusal:
                    results.append(refusal)
            return results

    def _count_refused(
        self,
        batch: _core.WriteBatch,
        record: BroadcastRecord,
        counts: dict[str, int],
        now: datetime,
    ) -> None:
        """Members not sent to because their address is suppressed, or whose message could
        not be built, count as `suppressed` and `failed` in the metrics too (the team's, the
        broadcast's and its sending domain's)."""
        refused = {name: counts[name] for name in ("suppressed", "failed") if counts.get(name)}
        if not refused:
            return
        domain = find_verified_domain_for_sender(self.spool, record.team_id, _sender_domain(record))
        now_ms = int(now.timestamp() * 1000)
        for name, count in refused.items():
            add_metric_count(
                batch, record.team_id, None if domain is None else domain.id, name, now_ms, count,
                broadcast_id=record.id,
            )  # fmt: skip

    async def _commit_page(self, record: BroadcastRecord, page: _Page) -> bool:
        """Commit the page with the broadcast's new cursor, guarded by its key; False when
        the broadcast changed meanwhile (canceled: the page is dropped)."""
        flight = page.flight
        finished = flight.finished
        key = broadcast_key(record.team_id, record.id)
        async for attempt in self.spool.guarded(key):
            with attempt:
                current = get_broadcast(self.spool, record.team_id, record.id)
                if (
                    current is None
                    or current.status not in PENDING_STATUSES  # canceled or deleted
                    or current.cursor != flight.after  # not the page after the last committed
                    or _content(current) != _content(record)  # edited before its walk began
                ):
                    self.walks.pop(record.id, None)
                    return False
                now = self.now()
                batch = _core.WriteBatch()
                self.acceptor.add_to_batch(batch, page.prepared, now)
                counts: dict[str, int] = {}
                for contact_id, outcome in page.outcomes:
                    add_contact_outcome(batch, record.team_id, record.id, contact_id, outcome)
                    counts[outcome.status] = counts.get(outcome.status, 0) + 1
                for name, count in counts.items():
                    add_count(batch, record.team_id, record.id, name, count)
                self._count_refused(batch, record, counts, now)
                stamp = contract_timestamp(now)
                updated = replace(
                    current,
                    status="sent" if finished else "sending",
                    cursor=flight.members[-1] if flight.members else current.cursor,
                    sent_at=current.sent_at or stamp,
                )
                if finished:
                    set_due(batch, current, None)
                    updated = replace(updated, due_at_ms=None, finished_at=stamp)
                put_broadcast(batch, updated)
                await self.spool.commit(batch)
                OPERATOR_METRICS.count_accepted("broadcast", len(page.prepared))
        if finished:
            self.walks.pop(record.id, None)
            log.info("broadcast %s sent", record.id)
        return True

    async def _postpone(self, record: BroadcastRecord) -> None:
        """Move the broadcast's due entry `RETRY_SECONDS` on, unless it changed meanwhile."""
        self.walks.pop(record.id, None)
        key = broadcast_key(record.team_id, record.id)
        async for attempt in self.spool.guarded(key):
            with attempt:
                current = get_broadcast(self.spool, record.team_id, record.id)
                if current is None or current.status not in PENDING_STATUSES:
                    return
                due_ms = self.now_ms() + int(RETRY_SECONDS * 1000)
                batch = _core.WriteBatch()
                set_due(batch, current, due_ms)
                put_broadcast(batch, replace(current, due_at_ms=due_ms))
                await self.spool.commit(batch)

    async def _drop_due(self, due_at_ms: int, entry: DueEntry) -> None:
        batch = _core.WriteBatch()
        BROADCAST_DUE.delete(batch, due_key(due_at_ms, entry.team_id, entry.broadcast_id))
        await self.spool.commit(batch)
        self.walks.pop(entry.broadcast_id, None)


def _content(record: BroadcastRecord) -> tuple[object, ...]:
    """What the walk's messages are made of: a scheduled broadcast may still change until its
    first page commits, and a page made from the content before must not."""
    return (
        record.segment_id, record.sender, record.subject, record.reply_to, record.html,
        record.text, record.preview_text, record.topic_id,
    )  # fmt: skip


def _sender_domain(record: BroadcastRecord) -> str:
    return record.sender.rpartition("@")[2].rstrip(">").strip().lower()


async def serve_broadcasts(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run due broadcasts until the stage stops.

    Runs in the first process only: one walk per broadcast. When `deps.stopping` is set it
    finishes the page in hand and returns; cancelled, the page is lost and walked again at
    the next start (nothing of it was committed).
    """
    engine = BroadcastEngine(config, deps.spool, delivery=deps.delivery)
    task_status.started()
    await engine.run(deps.stopping)
