"""The delivery queue as an operator sees it: the spooled messages with their delivery records,
read page by page, and the two changes an operator makes to one: deliver it now, or drop it.

Reads never walk the whole queue: `deliveries` is keyed by message id, a UUIDv7, so it lists
messages oldest first and an age is a key bound; `retry_waiting` lists those waiting on one
recipient domain. Changes go through the spool's own scheduling (`WriteBatch.reschedule`,
`remove`), which the delivery engines of every process lease from, and keep the retry counts
and rows the delivery engine keeps (`retry_waiting`, `counters`) in the same commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from postwire._core import MessageState, WriteBatch
from postwire.errors import LeaseLostError, NoSuchMessageError
from postwire.metrics.operator_registry import (
    RETRY_BACKLOG_KEY,
    retry_destination_changes,
    retry_destination_key,
)
from postwire.store.deliveries import DELIVERIES, DeliveryRecord
from postwire.store.emails import EMAILS, cancel_email, email_key, record_last_event
from postwire.store.retry_waiting import TABLE as RETRY_WAITING
from postwire.store.retry_waiting import mark_waiting
from postwire.store.spool import Spool

QueueState = Literal["scheduled", "deferred", "due", "in_flight"]
# Rows read per scan while skipping delivery records whose message has left the spool.
_CHUNK: Final = 500


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """One spooled message with what delivery keeps beside it."""

    id: str
    delivery: DeliveryRecord
    state: MessageState

    def status(self, now_ms: int) -> QueueState:
        if self.state.lease != 0 and self.state.due_at_ms > now_ms:
            return "in_flight"
        if self.state.due_at_ms <= now_ms:
            return "due"
        return "deferred" if self.state.attempts > 0 else "scheduled"


def id_time_ms(message_id: str) -> int:
    """When a message id was made: the 48-bit millisecond time that starts every UUIDv7."""
    return int(message_id[:8] + message_id[9:13], 16)


def id_bound(ms: int) -> str:
    """A key that sorts before every UUIDv7 made at `ms` and after those made earlier."""
    digits = f"{ms:012x}"
    return f"{digits[:8]}-{digits[8:]}"


def queued_message(spool: Spool, message_id: str) -> QueuedMessage | None:
    """The spooled message `message_id` with its delivery record; None when not queued."""
    delivery = DELIVERIES.get(spool, message_id)
    state = spool.message_state(message_id)
    if delivery is None or state is None:
        return None
    return QueuedMessage(message_id, delivery, state)


def queued_page(
    spool: Spool, *, limit: int, after: str | None = None, enqueued_before_ms: int | None = None
) -> list[QueuedMessage]:
    """Up to `limit` queued messages, oldest first, after the message id `after`; with
    `enqueued_before_ms`, only those enqueued before it (a key bound: the scan stops there)."""
    bound = None if enqueued_before_ms is None else id_bound(enqueued_before_ms)
    found: list[QueuedMessage] = []
    cursor = after
    while len(found) < limit:
        rows = DELIVERIES.scan(spool, cursor=cursor, limit=_CHUNK)
        for message_id, delivery in rows:
            if bound is not None and message_id >= bound:
                return found
            state = spool.message_state(message_id)
            if state is not None:
                found.append(QueuedMessage(message_id, delivery, state))
                if len(found) == limit:
                    return found
        if len(rows) < _CHUNK:
            return found
        cursor = rows[-1][0]
    return found


def waiting_page(
    spool: Spool,
    domain: str,
    *,
    limit: int,
    after: str | None = None,
    enqueued_before_ms: int | None = None,
) -> list[QueuedMessage]:
    """Up to `limit` messages waiting to be tried again for a recipient at `domain`, oldest
    first, after the message id `after` (messages never tried yet wait on no domain)."""
    prefix = f"{domain.lower()}/".encode()
    cursor = None
    if after is not None:
        state = spool.message_state(after)
        if state is not None:
            cursor = prefix + f"{state.enqueued_at_ms:013d}/{after}".encode()
    found: list[QueuedMessage] = []
    while len(found) < limit:
        rows = spool.scan(RETRY_WAITING, prefix=prefix, cursor=cursor, limit=_CHUNK)
        for key, _ in rows:
            enqueued_ms, message_id = key[len(prefix) :].decode().split("/")
            if enqueued_before_ms is not None and int(enqueued_ms) >= enqueued_before_ms:
                return found
            message = queued_message(spool, message_id)
            if message is not None:
                found.append(message)
                if len(found) == limit:
                    return found
        if len(rows) < _CHUNK:
            return found
        cursor = rows[-1][0]
    return found


def oldest_queued(spool: Spool) -> QueuedMessage | None:
    page = queued_page(spool, limit=1)
    return page[0] if page else None


class QueueChangeRefused(Exception):
    """The message cannot be changed as asked; the message says why, for the operator."""


async def deliver_now(spool: Spool, message_id: str, now_ms: int) -> QueuedMessage:
    """Make a deferred message due now instead of at the end of its back-off: the delivery
    engines, which lease due messages from the spool, take it at their next look (within half
    a second). Its retry schedule stays the engine's (`next_attempt_at` counts from the first
    attempt), so the message still bounces once it has waited `delivery.max_age_hours`."""
    message = _require_queued(spool, message_id)
    status = message.status(now_ms)
    if status == "in_flight":
        raise QueueChangeRefused(f"{message_id} is being delivered right now")
    if status == "due":
        raise QueueChangeRefused(f"{message_id} is due already: a delivery worker takes it next")
    if status == "scheduled":
        raise QueueChangeRefused(
            f"{message_id} is scheduled for later: reschedule it through the API "
            "(PATCH /emails/{id}) to send it sooner"
        )
    batch = WriteBatch()
    batch.reschedule(message_id, now_ms, now_ms)
    try:
        await spool.commit(batch)
    except (LeaseLostError, NoSuchMessageError):
        raise QueueChangeRefused(f"{message_id} was taken for delivery meanwhile") from None
    return message


async def remove_queued(spool: Spool, message_id: str, now_ms: int) -> QueuedMessage:
    """Take a message out of the queue: its recipients not reached yet never get it.

    A scheduled email is canceled as the API cancels it (`cancel_email`). Any other email
    becomes `canceled` too, in the commit that removes its message, its delivery record and its
    place in the retry queues (with the counts the metrics read). No webhook event: the
    contract has none for a cancellation."""
    message = _require_queued(spool, message_id)
    if message.status(now_ms) == "in_flight":
        raise QueueChangeRefused(f"{message_id} is being delivered right now: try again")
    delivery = message.delivery
    key = email_key(delivery.team_id, message_id)
    async for attempt in spool.guarded(key):
        with attempt:
            record = None if delivery.is_system else EMAILS.get(spool, key)
            if record is not None and record.last_event == "scheduled":
                await cancel_email(spool, record, now_ms)
                return message
            batch = WriteBatch()
            batch.remove(message_id, now_ms)
            DELIVERIES.delete(batch, message_id)
            if delivery.attempts > 0:  # it waits in the retry queues: it leaves them
                batch.add_counter("counters", RETRY_BACKLOG_KEY, -1)
                for domain, delta in retry_destination_changes(delivery.pending, []):
                    batch.add_counter("counters", retry_destination_key(domain), delta)
                    mark_waiting(
                        batch, domain, message.state.enqueued_at_ms, message_id, waiting=False
                    )
            if record is not None:
                record_last_event(batch, record, "canceled")
            try:
                await spool.commit(batch)
            except (LeaseLostError, NoSuchMessageError):
                raise QueueChangeRefused(f"{message_id} was taken for delivery meanwhile") from None
    return message


def _require_queued(spool: Spool, message_id: str) -> QueuedMessage:
    message = queued_message(spool, message_id)
    if message is None:
        raise QueueChangeRefused(f"no message {message_id} in the queue")
    return message
