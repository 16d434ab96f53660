"""What delivery keeps beside each spooled message, the events it reports, and the team's
suppression list.

A delivery record is written with its email (same commit) and says who still has to receive
the message; events and suppressions are written in the same commit as the state change that
caused them, so a webhook dispatcher reading `events` never misses one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypedDict, cast

from postwire import _core
from postwire._core import WriteBatch
from postwire.store.accounts import contract_timestamp
from postwire.store.broadcasts import count_email_event
from postwire.store.email_index import index_email_event
from postwire.store.metric_counters import count_event
from postwire.store.spool import Spool
from postwire.store.tables import Table


class AttemptRecipient(TypedDict):
    email: str
    status: Literal["delivered", "bounced", "delivery_delayed", "suppressed"]
    diagnostic: str | None  # the server's reply, or Postwire's reason ("smtp; 250 ...")


class DeliveryAttempt(TypedDict):
    """One hand-out of the email to the delivery engine (a Postwire extension of the Email
    object; SDKs ignore it). `interrupted`: the service stopped or lost the message's lease
    before the outcome was recorded, so the next attempt is a `redelivery` and recipients
    the interrupted one reached may receive the email twice (same id and Message-ID)."""

    number: int
    status: Literal["in_progress", "completed", "interrupted"]
    started_at: str | None
    finished_at: str | None
    redelivery: bool
    recipients: list[AttemptRecipient]


# The owner of system mail (password resets, invitations, address checks): no team. Team ids
# are UUIDs, so no team's keys (`{team_id}/...`) ever reach this owner's, and the engine records
# no team's events, suppressions, counts or attempts for its messages.
SYSTEM_OWNER: Final = "system"


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    team_id: str  # SYSTEM_OWNER: system mail
    envelope_from: str
    recipients: list[str]
    tls: str  # the sending domain's policy: "opportunistic" | "enforced"
    # Recipient -> its final status ("delivered", "bounced", "suppressed").
    finished: dict[str, str] = field(default_factory=dict)
    first_attempt_ms: int | None = None
    attempts: int = 0
    broadcast_id: str | None = None  # its events count towards this broadcast's
    # The sending domain's id, for the metrics' per-domain counts (None: spooled before they
    # were kept).
    domain_id: str | None = None
    # The labels its events count under in the metrics' per-tag counts
    # (`store.metric_counters.admit_tags`).
    tags: list[str] = field(default_factory=list)

    @property
    def pending(self) -> list[str]:
        return [r for r in self.recipients if r not in self.finished]

    @property
    def is_system(self) -> bool:
        """System mail: it belongs to no team, and leaves no trace in any team's records."""
        return self.team_id == SYSTEM_OWNER


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """An attempt at delivering an email that ran to its recorded outcome: one hand-out of
    its message to the engine, written in the outcome's commit. A hand-out without a record
    was interrupted (the service died, or lost the lease, before the outcome committed)."""

    number: int  # the hand-out's number, from 1 (the spool counts hand-outs)
    started_at_ms: int
    finished_at_ms: int
    # Hand-outs this attempt spans: a lease renewed too late hands a message out again while
    # the attempt is still in progress, and that is no interruption.
    covered: int = 1
    # Recipient -> {"status": delivered | bounced | delivery_delayed | suppressed,
    # "diagnostic": the server's reply or Postwire's reason}.
    recipients: dict[str, dict[str, str | None]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: str
    type: str  # email.sent, email.delivered, email.delivery_delayed, email.bounced, ...
    created_at_ms: int
    team_id: str
    email_id: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An event not yet handed to the team's webhook endpoints, under its id: ids are
    time-ordered, so the dispatcher takes events across teams in the order they happened."""

    team_id: str
    # The event's type, so that one no endpoint takes is dropped without reading it ("" in
    # entries written before it was kept: those are read).
    event_type: str = ""


@dataclass(frozen=True, slots=True)
class SuppressionRecord:
    id: str
    email: str  # lower case
    origin: str  # "bounce", "complaint" or "manual"
    created_at_ms: int
    source_id: str | None = None  # the email whose bounce or complaint put it here


DELIVERIES = Table("deliveries", DeliveryRecord)
ATTEMPTS = Table("attempts", AttemptRecord)
EVENTS = Table("events", EventRecord)
OUTBOX = Table("outbox", OutboxEntry)
SUPPRESSIONS = Table("suppressions", SuppressionRecord)


async def spool_system_message(
    spool: Spool,
    message_id: str,
    message: bytes,
    *,
    envelope_from: str,
    recipients: list[str],
    tls: str,
    now_ms: int,
) -> None:
    """Commit a system message, due now, with its delivery record and nothing else: no email
    record (its body holds a secret link that only the recipient may read; the ack that
    finishes its delivery drops it) and nothing of the team whose domain signs it."""
    batch = WriteBatch()
    batch.enqueue(message_id, message, now_ms, now_ms)
    DELIVERIES.put(batch, message_id, DeliveryRecord(SYSTEM_OWNER, envelope_from, recipients, tls))
    await spool.commit(batch)


def suppression_key(team_id: str, address: str) -> str:
    return f"{team_id}/{address.lower()}"


def is_suppressed(spool: Spool, team_id: str, address: str) -> bool:
    return SUPPRESSIONS.get(spool, suppression_key(team_id, address)) is not None


async def suppressed_among(spool: Spool, team_id: str, addresses: Iterable[str]) -> list[str]:
    """The `addresses` on the team's suppression list (reads parked, never blocking)."""
    return [
        address
        for address in addresses
        if await SUPPRESSIONS.aget(spool, suppression_key(team_id, address)) is not None
    ]


def add_event(
    batch: WriteBatch,
    team_id: str,
    email_id: str,
    kind: str,
    now_ms: int,
    *,
    broadcast_id: str | None = None,
    domain_id: str | None = None,
    counted_tags: tuple[str, ...] = (),
    **data: Any,
) -> EventRecord:
    """Add an event to `batch`, and to the webhook outbox in the same commit; its id is
    time-ordered, so a team's events scan in order. An email's event adds to the metrics'
    counts of its team and of its sending domain (`domain_id`), broadcast and tags
    (`counted_tags`, from `store.metric_counters`) when given, and an event of a broadcast's
    email (its `broadcast_id` given) to the broadcast's counts, in the same commit."""
    event = EventRecord(_core.new_id(), kind, now_ms, team_id, email_id, data)
    EVENTS.put(batch, event_key(team_id, event.id), event)
    OUTBOX.put(batch, event.id, OutboxEntry(team_id, kind))
    index_email_event(batch, team_id, email_id, event.id)  # the email's page reads its events
    count_event(
        batch, team_id, domain_id, kind, now_ms, data, broadcast_id=broadcast_id, tags=counted_tags
    )
    if broadcast_id is not None:
        count_email_event(batch, team_id, broadcast_id, email_id, kind, data)
    return event


def attempt_key(team_id: str, email_id: str, number: int) -> str:
    return f"{team_id}/{email_id}/{number:010d}"


def email_attempts(spool: Spool, team_id: str, email_id: str, now_ms: int) -> list[DeliveryAttempt]:
    """The email's delivery attempts, oldest first: the recorded ones, the one in progress
    (its message leased now, from the spool's state) and, between them, those interrupted."""
    rows = ATTEMPTS.scan(spool, prefix=_attempts_prefix(team_id, email_id), limit=100_000)
    return _attempts_of(spool, email_id, [record for _, record in rows], now_ms)


async def email_attempts_parked(
    spool: Spool, team_id: str, email_id: str, now_ms: int
) -> list[DeliveryAttempt]:
    """`email_attempts` with a parked read of the recorded attempts (the message's state is
    the node's own spool, a memory read)."""
    rows = await ATTEMPTS.ascan(spool, prefix=_attempts_prefix(team_id, email_id), limit=100_000)
    return _attempts_of(spool, email_id, [record for _, record in rows], now_ms)


def _attempts_prefix(team_id: str, email_id: str) -> str:
    return f"{team_id}/{email_id}/"


def _attempts_of(
    spool: Spool, email_id: str, recorded: list[AttemptRecord], now_ms: int
) -> list[DeliveryAttempt]:
    records = {record.number: record for record in recorded}
    covered = {n for r in records.values() for n in range(r.number, r.number + r.covered)}
    state = spool.message_state(email_id)
    handouts = max([*covered, 0 if state is None else state.deliveries])
    in_progress = state is not None and state.lease != 0 and state.due_at_ms > now_ms
    attempts: list[DeliveryAttempt] = []
    interrupted = False
    for number in range(1, handouts + 1):
        record = records.get(number)
        if record is not None:
            recipients = [
                cast(AttemptRecipient, {"email": address, **result})
                for address, result in record.recipients.items()
            ]
            attempts.append(_attempt(number, "completed", record.started_at_ms,
                                     record.finished_at_ms, interrupted, recipients))  # fmt: skip
        elif number in covered:
            continue
        elif in_progress and state is not None and number == state.deliveries:
            started = state.leased_at_ms or None
            attempts.append(_attempt(number, "in_progress", started, None, interrupted, []))
        else:
            attempts.append(_attempt(number, "interrupted", None, None, interrupted, []))
            interrupted = True
    return attempts


def _attempt(
    number: int,
    status: str,
    started_ms: int | None,
    finished_ms: int | None,
    redelivery: bool,
    recipients: list[AttemptRecipient],
) -> DeliveryAttempt:
    return cast(DeliveryAttempt, {
        "number": number, "status": status, "started_at": _timestamp(started_ms),
        "finished_at": _timestamp(finished_ms), "redelivery": redelivery,
        "recipients": recipients,
    })  # fmt: skip


def _timestamp(ms: int | None) -> str | None:
    return None if ms is None else contract_timestamp(datetime.fromtimestamp(ms / 1000, UTC))


def event_key(team_id: str, event_id: str) -> str:
    return f"{team_id}/{event_id}"


def email_events(spool: Spool, team_id: str, email_id: str) -> list[EventRecord]:
    """The email's events, oldest first (a scan of the team's events: fine for tests and the
    dashboard's detail page, not for hot paths)."""
    rows = EVENTS.scan(spool, prefix=f"{team_id}/", limit=1_000_000)
    return [event for _, event in rows if event.email_id == email_id]


def new_suppression(
    address: str, origin: str, now_ms: int, source_id: str | None = None
) -> SuppressionRecord:
    return SuppressionRecord(_core.new_id(), address.lower(), origin, now_ms, source_id)


def list_suppressions(spool: Spool, team_id: str) -> list[SuppressionRecord]:
    return [record for _, record in SUPPRESSIONS.scan(spool, prefix=f"{team_id}/", limit=1_000_000)]


async def list_suppressions_parked(spool: Spool, team_id: str) -> list[SuppressionRecord]:
    """`list_suppressions`, parked rather than blocking on a table store on the network."""
    rows = await SUPPRESSIONS.ascan(spool, prefix=f"{team_id}/", limit=1_000_000)
    return [record for _, record in rows]
