"""What an email's dashboard page reads beside its record: its events and its raw source.

Events are found through the email's entries in `email_index` (`e/<team>/<email>/<event>`)
when the commit that added them wrote those; otherwise by a bounded walk of the team's events
from the email's creation on (event ids are UUIDv7, made when the event happened, so none of
an email's events sorts before the email itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from postwire.store.deliveries import EVENTS, EventRecord, event_key
from postwire.store.email_index import indexed_event_ids
from postwire.store.email_insights import kept_body, kept_body_parked
from postwire.store.emails import EmailRecord
from postwire.store.sandbox_inbox import held_source, held_source_parked
from postwire.store.spool import Spool

# An email's events shown at most (a much-opened email's opens included).
MAX_EVENTS: Final = 500
# Team events read at most when the email's events are not indexed.
EVENT_SCAN_BUDGET: Final = 20_000
_CHUNK: Final = 500


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
    return _walk_team_events(spool, team_id, record.id)


def _walk_team_events(spool: Spool, team_id: str, email_id: str) -> EmailEvents:
    prefix = f"{team_id}/"
    # The email id's time part (its `id_floor`): none of its events is older.
    cursor: str | None = prefix + email_id[:13]
    events: list[EventRecord] = []
    read = 0
    while read < EVENT_SCAN_BUDGET:
        rows = EVENTS.scan(spool, prefix=prefix, cursor=cursor, limit=_CHUNK)
        read += len(rows)
        events += [event for _, event in rows if event.email_id == email_id]
        if len(rows) < _CHUNK or len(events) >= MAX_EVENTS:
            return EmailEvents(events[:MAX_EVENTS], True)
        cursor = rows[-1][0]
    return EmailEvents(events, False)


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
