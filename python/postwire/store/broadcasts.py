"""Broadcasts: their records, the due index the engine works from, what became of each
recipient, and the counts the API serves without scanning.

Keys (every table's keys start with the team, so no read crosses teams):

    broadcasts             {team}/{broadcast}                   BroadcastRecord
    broadcast_due          {due ms, 16 digits}/{team}/{broadcast} DueEntry, while scheduled,
                                                                 queued or sending
    broadcast_recipients   {team}/{broadcast}/contact/{contact}  ContactOutcome: what the walk
                                                                 did with each member
                           {team}/{broadcast}/{type}/{row id}    RecipientRow, one per recipient
                                                                 an event of `type` concerns
                           {team}/{broadcast}/link/{link id}     LinkRow: a link clicked
    counters               broadcast/{team}/{broadcast}/{name}   the counts of `COUNTS`

The engine commits a page's messages, their contact outcomes, the counters and the record's
new cursor in one batch; events of the broadcast's emails add to the counters in the commit
that records them (`count_email_event`, called by `store.deliveries.add_event`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from postwire._core import WriteBatch
from postwire.concurrency import in_order
from postwire.store.spool import Spool
from postwire.store.tables import Table

COUNTERS_TABLE: Final = "counters"

STATUSES: Final = ("draft", "scheduled", "queued", "sending", "sent", "canceled")
# The broadcasts the engine has work for: each has an entry in the due index.
PENDING_STATUSES: Final = ("scheduled", "queued", "sending")
# The recipient lists of `GET /broadcasts/{id}/recipients?type=...` (the SDKs' event types).
RECIPIENT_TYPES: Final = (
    "sent",
    "delivered",
    "opened",
    "clicked",
    "bounced",
    "complained",
    "unsubscribed",
    "suppressed",
)
# Every count a broadcast keeps: messages enqueued by the walk, the events of its emails,
# contacts the walk skipped, and unsubscribes through its links.
COUNTS: Final = (
    "queued",
    "sent",
    "delivered",
    "delivery_delayed",
    "bounced",
    "complained",
    "opened",
    "clicked",
    "failed",
    "suppressed",
    "skipped_unsubscribed",
    "skipped_topic",
    "unsubscribed",
)
# Email events counted per occurrence, and listed by recipient where the SDKs list them.
_DELIVERY_EVENTS: Final = {
    "email.sent": "sent",
    "email.delivered": "delivered",
    "email.delivery_delayed": "delivery_delayed",
    "email.bounced": "bounced",
    "email.complained": "complained",
}
# Bounce types as the recipients list names them (the webhook's `bounce.type`, lower case).
BOUNCE_TYPES: Final = ("permanent", "transient", "undetermined")


@dataclass(frozen=True, slots=True)
class BroadcastRecord:
    id: str
    team_id: str
    segment_id: str
    sender: str  # the `from` field as given, display name included
    subject: str
    created_at: str  # store.accounts.contract_timestamp
    status: str = "draft"
    name: str = ""
    reply_to: list[str] = field(default_factory=list)
    html: str | None = None
    text: str | None = None
    preview_text: str | None = None
    topic_id: str | None = None
    scheduled_at: str | None = None
    sent_at: str | None = None  # when the walk began
    # While scheduled, queued or sending: the moment of its due entry (the key names it).
    due_at_ms: int | None = None
    # The last member of the segment the walk has done, committed with its message.
    cursor: str | None = None
    finished_at: str | None = None  # when the walk ended (sent or canceled)


@dataclass(frozen=True, slots=True)
class DueEntry:
    team_id: str
    broadcast_id: str


@dataclass(frozen=True, slots=True)
class ContactOutcome:
    """What the walk did with one member: `queued` (its email), `skipped_unsubscribed`,
    `skipped_topic`, `suppressed`, or `failed` (its message could not be built)."""

    email: str
    status: str
    email_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecipientRow:
    """A recipient an event concerns; the row's id is its email's (its contact's for
    `suppressed` and `unsubscribed`, which have no email)."""

    email: str
    contact_id: str | None = None
    count: int = 1
    bounce_type: str | None = None
    links: dict[str, int] = field(default_factory=dict)  # clicked: link -> clicks


@dataclass(frozen=True, slots=True)
class LinkRow:
    url: str


BROADCASTS = Table("broadcasts", BroadcastRecord)
BROADCAST_DUE = Table("broadcast_due", DueEntry)
CONTACT_OUTCOMES = Table("broadcast_recipients", ContactOutcome)
RECIPIENT_ROWS = Table("broadcast_recipients", RecipientRow)
LINK_ROWS = Table("broadcast_recipients", LinkRow)


def broadcast_key(team_id: str, broadcast_id: str) -> str:
    return f"{team_id}/{broadcast_id}"


def broadcasts_prefix(team_id: str) -> str:
    return f"{team_id}/"


def due_key(due_ms: int, team_id: str, broadcast_id: str) -> str:
    return f"{due_ms:016d}/{team_id}/{broadcast_id}"


def contact_outcome_key(team_id: str, broadcast_id: str, contact_id: str) -> str:
    return f"{team_id}/{broadcast_id}/contact/{contact_id}"


def recipients_prefix(team_id: str, broadcast_id: str, kind: str) -> str:
    return f"{team_id}/{broadcast_id}/{kind}/"


def links_prefix(team_id: str, broadcast_id: str) -> str:
    return f"{team_id}/{broadcast_id}/link/"


def link_id(url: str) -> str:
    """A link's id in its broadcast: a UUID of the URL, so a cursor looks like every other."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, url))


def counter_key(team_id: str, broadcast_id: str, name: str) -> bytes:
    return f"broadcast/{team_id}/{broadcast_id}/{name}".encode()


def unsubscribed_counter_key(team_id: str, broadcast_id: str) -> bytes:
    """Counted by the one-click unsubscribe of a link from this broadcast."""
    return counter_key(team_id, broadcast_id, "unsubscribed")


def link_counter_key(team_id: str, broadcast_id: str, link: str, name: str) -> bytes:
    """`clicks` or `unique_clicks` of one link (its `link_id`)."""
    return counter_key(team_id, broadcast_id, f"link/{link}/{name}")


# --- records and the due index -----------------------------------------------------------------


def get_broadcast(spool: Spool, team_id: str, broadcast_id: str) -> BroadcastRecord | None:
    return BROADCASTS.get(spool, broadcast_key(team_id, broadcast_id))


async def get_broadcast_parked(
    spool: Spool, team_id: str, broadcast_id: str
) -> BroadcastRecord | None:
    """`get_broadcast`, parked rather than blocking on a table store on the network."""
    return await BROADCASTS.aget(spool, broadcast_key(team_id, broadcast_id))


def put_broadcast(batch: WriteBatch, record: BroadcastRecord) -> None:
    BROADCASTS.put(batch, broadcast_key(record.team_id, record.id), record)


def set_due(batch: WriteBatch, record: BroadcastRecord, due_ms: int | None) -> None:
    """Move the record's due entry to `due_ms` (None: remove it). The caller writes the record
    with `due_at_ms=due_ms` in the same batch."""
    if record.due_at_ms is not None:
        BROADCAST_DUE.delete(batch, due_key(record.due_at_ms, record.team_id, record.id))
    if due_ms is not None:
        BROADCAST_DUE.put(
            batch, due_key(due_ms, record.team_id, record.id), DueEntry(record.team_id, record.id)
        )


def delete_broadcast(batch: WriteBatch, record: BroadcastRecord) -> None:
    """Remove the record and its due entry (a draft or scheduled one: nothing was sent)."""
    set_due(batch, record, None)
    BROADCASTS.delete(batch, broadcast_key(record.team_id, record.id))


def due_entries(spool: Spool, *, limit: int) -> list[tuple[int, DueEntry]]:
    """The first `limit` entries of the due index, soonest first, with their due moments."""
    rows = BROADCAST_DUE.scan(spool, limit=limit)
    return [(int(key.partition("/")[0]), entry) for key, entry in rows]


# --- counts ------------------------------------------------------------------------------------


def add_count(batch: WriteBatch, team_id: str, broadcast_id: str, name: str, delta: int) -> None:
    if delta:
        batch.add_counter(COUNTERS_TABLE, counter_key(team_id, broadcast_id, name), delta)


def broadcast_counts(spool: Spool, team_id: str, broadcast_id: str) -> dict[str, int]:
    """Every count of `COUNTS`, one read each."""
    return {
        name: spool.counter(COUNTERS_TABLE, counter_key(team_id, broadcast_id, name))
        for name in COUNTS
    }


async def broadcast_counts_parked(spool: Spool, team_id: str, broadcast_id: str) -> dict[str, int]:
    """`broadcast_counts`, parked rather than blocking on a table store on the network: the
    counters are read together (their gets leave as one statement)."""

    async def count(name: str) -> int:
        return await spool.acounter(COUNTERS_TABLE, counter_key(team_id, broadcast_id, name))

    return dict(zip(COUNTS, await in_order(count, COUNTS, at_once=len(COUNTS)), strict=True))


def add_contact_outcome(
    batch: WriteBatch,
    team_id: str,
    broadcast_id: str,
    contact_id: str,
    outcome: ContactOutcome,
) -> None:
    """Record what the walk did with a member (the `sent` recipients list reads these); a
    suppressed member is listed among the `suppressed` recipients too."""
    key = contact_outcome_key(team_id, broadcast_id, contact_id)
    CONTACT_OUTCOMES.put(batch, key, outcome)
    if outcome.status == "suppressed":
        row = RecipientRow(outcome.email, contact_id)
        RECIPIENT_ROWS.put(
            batch, recipients_prefix(team_id, broadcast_id, "suppressed") + contact_id, row
        )


def get_contact_outcome(
    spool: Spool, team_id: str, broadcast_id: str, contact_id: str
) -> ContactOutcome | None:
    return CONTACT_OUTCOMES.get(spool, contact_outcome_key(team_id, broadcast_id, contact_id))


def count_email_event(
    batch: WriteBatch,
    team_id: str,
    broadcast_id: str,
    email_id: str,
    kind: str,
    data: dict[str, Any],
) -> None:
    """Count an event of one of the broadcast's emails, in the batch that records it, and list
    its recipient under the event's type. `email.sent` is listed when the walk enqueues."""
    name = _DELIVERY_EVENTS.get(kind)
    if name is None:
        return
    add_count(batch, team_id, broadcast_id, name, 1)
    address = data.get("to")
    if name in ("delivered", "bounced", "complained") and isinstance(address, str):
        bounce = data.get("bounce")
        bounce_type = None
        if name == "bounced" and isinstance(bounce, dict):
            bounce_type = str(bounce.get("type", "undetermined")).lower()
        row = RecipientRow(address, bounce_type=bounce_type)
        RECIPIENT_ROWS.put(batch, recipients_prefix(team_id, broadcast_id, name) + email_id, row)


def count_engagement(
    batch: WriteBatch,
    spool: Spool,
    team_id: str,
    broadcast_id: str,
    email_id: str,
    address: str,
    kind: str,
    link: str | None = None,
) -> None:
    """Count an open or click (`kind` "opened" | "clicked") of one of the broadcast's emails.
    The counts are of recipients (the first open or click of each email counts); the
    recipient's row counts every one, and each link its clicks and its clicking recipients.
    The caller holds the email's guard, so its row is read and written by one writer."""
    key = recipients_prefix(team_id, broadcast_id, kind) + email_id
    row = RECIPIENT_ROWS.get(spool, key)
    if row is None:
        add_count(batch, team_id, broadcast_id, kind, 1)
        row = RecipientRow(address, count=0)
    links = row.links
    if link is not None:
        clicked = link_id(link)
        batch.add_counter(
            COUNTERS_TABLE, link_counter_key(team_id, broadcast_id, clicked, "clicks"), 1
        )
        if link not in links:
            unique = link_counter_key(team_id, broadcast_id, clicked, "unique_clicks")
            batch.add_counter(COUNTERS_TABLE, unique, 1)
            LINK_ROWS.put(batch, links_prefix(team_id, broadcast_id) + clicked, LinkRow(link))
        links = {**links, link: links.get(link, 0) + 1}
    RECIPIENT_ROWS.put(
        batch, key, RecipientRow(row.email, row.contact_id, row.count + 1, None, links)
    )


def count_unsubscribe(
    batch: WriteBatch, team_id: str, broadcast_id: str, contact_id: str, email: str
) -> None:
    """A contact unsubscribed through this broadcast's link: counted and listed."""
    batch.add_counter(COUNTERS_TABLE, unsubscribed_counter_key(team_id, broadcast_id), 1)
    row = RecipientRow(email, contact_id)
    RECIPIENT_ROWS.put(
        batch, recipients_prefix(team_id, broadcast_id, "unsubscribed") + contact_id, row
    )


def link_counts(spool: Spool, team_id: str, broadcast_id: str, link: str) -> tuple[int, int]:
    """(clicks, unique clicks) of the link whose `link_id` is `link`."""
    clicks = spool.counter(COUNTERS_TABLE, link_counter_key(team_id, broadcast_id, link, "clicks"))
    unique = spool.counter(
        COUNTERS_TABLE, link_counter_key(team_id, broadcast_id, link, "unique_clicks")
    )
    return clicks, unique


# --- reading the lists -------------------------------------------------------------------------

# Rows read per scan while filtering a recipients list.
_SCAN_CHUNK: Final = 500
# A broadcast's links are those of its HTML: few. Read at most this many.
MAX_LINKS: Final = 10_000


def recipient_rows_page(
    spool: Spool,
    team_id: str,
    broadcast_id: str,
    kind: str,
    *,
    after: str | None,
    before: str | None,
    limit: int,
    keep: Callable[[RecipientRow], bool] = lambda row: True,
) -> tuple[list[tuple[str, RecipientRow]], bool]:
    """Rows `(row id, row)` of one recipients list that `keep` accepts, newest first, strictly
    older than `after` or newer than `before`; at most `limit`, and whether more lie beyond.
    Rows are read in chunks with the store's cursor, never the whole list at once. The `sent`
    list is the members the walk enqueued a message for, by contact id."""
    if kind == "sent":
        prefix = f"{team_id}/{broadcast_id}/contact/"

        def sent(key: str, raw: bytes) -> RecipientRow | None:
            outcome = CONTACT_OUTCOMES.decode(raw)
            return RecipientRow(outcome.email, key) if outcome.status == "queued" else None

        return _newest_first(spool, prefix, sent, keep, after, before, limit)
    return _newest_first(
        spool, recipients_prefix(team_id, broadcast_id, kind),
        lambda _, raw: RECIPIENT_ROWS.decode(raw), keep, after, before, limit,
    )  # fmt: skip


def _newest_first(
    spool: Spool,
    prefix: str,
    row_of: Callable[[str, bytes], RecipientRow | None],
    keep: Callable[[RecipientRow], bool],
    after: str | None,
    before: str | None,
    limit: int,
) -> tuple[list[tuple[str, RecipientRow]], bool]:
    toward_newer = before is not None
    cursor_id = before if toward_newer else after
    cursor = None if cursor_id is None else (prefix + cursor_id).encode()
    rows: list[tuple[str, RecipientRow]] = []
    while len(rows) <= limit:
        chunk = spool.scan(
            RECIPIENT_ROWS.name, prefix=prefix.encode(), cursor=cursor,
            reverse=not toward_newer, limit=_SCAN_CHUNK,
        )  # fmt: skip
        for key, raw in chunk:
            row_id = key.decode()[len(prefix) :]
            row = row_of(row_id, raw)
            if row is not None and keep(row):
                rows.append((row_id, row))
        if len(chunk) < _SCAN_CHUNK:
            break
        cursor = chunk[-1][0]
    has_more = len(rows) > limit
    rows = rows[:limit]
    if toward_newer:
        rows.reverse()
    return rows, has_more


def clicked_links(spool: Spool, team_id: str, broadcast_id: str) -> list[tuple[str, str]]:
    """`(link id, url)` of every link of the broadcast clicked at least once."""
    prefix = links_prefix(team_id, broadcast_id)
    rows = LINK_ROWS.scan(spool, prefix=prefix, limit=MAX_LINKS)
    return [(key[len(prefix) :], row.url) for key, row in rows]
