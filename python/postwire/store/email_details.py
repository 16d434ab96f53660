"""What an email's dashboard page reads beside its record: its events and its raw source.

Events are found through the email's entries in `email_index` (`e/<team>/<email>/<event>`)
when the commit that added them wrote those; otherwise by a bounded walk of the team's events
from the email's creation on (event ids are UUIDv7, made when the event happened, so none of
an email's events sorts before the email itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from postwire.concurrency import in_order
from postwire.store.deliveries import EVENTS, EventRecord, event_key
from postwire.store.email_index import indexed_event_ids, indexed_event_ids_parked
from postwire.store.email_insights import kept_body, kept_body_parked
from postwire.store.emails import EmailRecord
from postwire.store.sandbox_inbox import held_source, held_source_parked
from postwire.store.spool import Spool

# An email's events shown at most (a much-opened email's opens included).
MAX_EVENTS: Final = 500
# Team events read at most when the email's events are not indexed.
EVENT_SCAN_BUDGET: Final = 20_000
_CHUNK: Final = 500
# An email's indexed events waiting at once for a table store on the network.
_EVENTS_AT_ONCE: Final = 64


@dataclass(frozen=True, slots=True)
class EmailEvents:
    events: list[EventRecord]  # oldest first
    complete: bool  # False: the walk stopped at its budget, later events may be missing


def email_events(spool: Spool, record: EmailRecord) -> EmailEvents:
    """The email's events, oldest first."""
    team_id = record.team_id
    indexed = indexed_event_ids(spool, team_id, record.id, MAX_EVENTS)
    if indexed:
        found = [EVENTS.get(spool, event_key(team_id, event_id)) for event_id in indexed]
        return EmailEvents([event for event in found if event is not None], True)
    walk = _TeamEventsWalk(team_id, record.id)
    while (rows := walk.next_chunk()) is not None:
        walk.take(EVENTS.scan(spool, **rows))
    return walk.result()


async def email_events_parked(spool: Spool, record: EmailRecord) -> EmailEvents:
    """`email_events`, parked rather than blocking on a table store on the network (the
    email's page): the indexed events are read together, their round trips overlapping."""
    team_id = record.team_id
    indexed = await indexed_event_ids_parked(spool, team_id, record.id, MAX_EVENTS)
    if indexed:

        async def event_of(event_id: str) -> EventRecord | None:
            return await EVENTS.aget(spool, event_key(team_id, event_id))

        found = await in_order(event_of, indexed, at_once=_EVENTS_AT_ONCE)
        return EmailEvents([event for event in found if event is not None], True)
    walk = _TeamEventsWalk(team_id, record.id)
    while (rows := walk.next_chunk()) is not None:
        walk.take(await EVENTS.ascan(spool, **rows))
    return walk.result()


@dataclass(slots=True)
class _TeamEventsWalk:
    """A bounded walk of the team's events from the email's creation on, a chunk a read."""

    team_id: str
    email_id: str
    events: list[EventRecord] = field(default_factory=list)
    read: int = 0
    done: bool = False
    cursor: str = ""

    def next_chunk(self) -> dict[str, Any] | None:
        """The scan's arguments for the next chunk; None when the walk is over."""
        if self.done or self.read >= EVENT_SCAN_BUDGET:
            return None
        prefix = f"{self.team_id}/"
        # The email id's time part (its `id_floor`): none of its events is older.
        cursor = self.cursor or prefix + self.email_id[:13]
        return {"prefix": prefix, "cursor": cursor, "limit": _CHUNK}

    def take(self, rows: list[tuple[str, EventRecord]]) -> None:
        self.read += len(rows)
        self.events += [event for _, event in rows if event.email_id == self.email_id]
        self.done = len(rows) < _CHUNK or len(self.events) >= MAX_EVENTS
        if rows:
            self.cursor = rows[-1][0]

    def result(self) -> EmailEvents:
        if self.done:
            return EmailEvents(self.events[:MAX_EVENTS], True)
        return EmailEvents(self.events, False)


@dataclass(frozen=True, slots=True)
class RawSource:
    content: bytes
    # "queue": still spooled for delivery; "sandbox": held by the sandbox inbox; "insights":
    # delivered, and kept until its insights are computed
    where: str


def raw_source(spool: Spool, record: EmailRecord) -> RawSource | None:
    """The signed message as Postwire sends it: from the queue while it waits for delivery,
    from the sandbox inbox that held it, or from the copy delivery keeps for the insights
    service until it has read it; None once delivered and looked at."""
    queued = spool.message_body(record.id)
    if queued is not None:
        return RawSource(queued, "queue")
    held = held_source(spool, record.team_id, record.id)
    if held is not None:
        return RawSource(held, "sandbox")
    kept = kept_body(spool, record.team_id, record.id)
    if kept is not None:
        return RawSource(kept, "insights")
    return None


async def raw_source_parked(
    spool: Spool, record: EmailRecord, *, sandboxed: bool
) -> RawSource | None:
    """`raw_source`, its table reads parked rather than blocking on a table store on the
    network. Only a delivery in sandbox mode holds messages in the sandbox inbox, so the inbox
    is looked in only when `sandboxed` (an email sent by an earlier sandbox run and judged
    after a restart without it is judged without its message)."""
    queued = spool.message_body(record.id)
    if queued is not None:
        return RawSource(queued, "queue")
    if sandboxed:
        held = await held_source_parked(spool, record.team_id, record.id)
        if held is not None:
            return RawSource(held, "sandbox")
    kept = await kept_body_parked(spool, record.team_id, record.id)
    return None if kept is None else RawSource(kept, "insights")
