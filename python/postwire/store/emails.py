"""Email records: what the API shows of every accepted email, next to its spooled message.

Records live under `{team_id}/{email_id}`; ids are time-ordered, so a reverse scan of a team's
prefix lists its emails newest first, and a cursor is just another key.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, TypedDict

from postwire._core import WriteBatch
from postwire.errors import ApiError, LeaseLostError, NoSuchMessageError
from postwire.store.email_index import TABLE as INDEX_TABLE
from postwire.store.email_index import index_new_email, move_status
from postwire.store.spool import Spool
from postwire.store.tables import Table

# Outcomes the sender must see: a later, milder event does not replace them as `last_event`
# (a bounce report can arrive before the engine records that another recipient took the mail).
FINAL_EVENTS: Final = frozenset({"bounced", "complained"})


def next_last_event(current: str, new: str) -> str:
    """An email's `last_event` once `new` happened to it."""
    return current if current in FINAL_EVENTS and new not in FINAL_EVENTS else new


@dataclass(frozen=True, slots=True)
class EmailRecord:
    id: str
    team_id: str
    domain_id: str
    sender: str  # the `from` field as sent, display name included
    to: list[str]
    subject: str
    message_id: str
    created_at: str
    last_event: str
    envelope_from: str
    recipients: list[str]  # to + cc + bcc addresses: the envelope
    cc: list[str] = field(default_factory=list)
    bcc: list[str] = field(default_factory=list)
    reply_to: list[str] = field(default_factory=list)
    html: str | None = None
    text: str | None = None
    tags: list[dict[str, str]] = field(default_factory=list)
    scheduled_at: str | None = None
    size: int = 0
    broadcast_id: str | None = None  # the broadcast that sent it
    template_id: str | None = None  # the template it was rendered from
    api_key_id: str | None = None  # the API key that sent it (None: a broadcast, or older)
    # The sender's own header fields, `{name, value}` in order: webhooks carry them (contract
    # 8.2 `data.headers`). Not those Postwire writes (a broadcast's List-Unsubscribe).
    headers: list[dict[str, str]] = field(default_factory=list)


EMAILS = Table("emails", EmailRecord)


def email_key(team_id: str, email_id: str) -> str:
    return f"{team_id}/{email_id}"


def add_email(
    batch: WriteBatch, record: EmailRecord, message: bytes, due_at_ms: int, now_ms: int
) -> None:
    """Add the record and its message to `batch`: they commit together or not at all."""
    batch.enqueue(record.id, message, due_at_ms, now_ms)
    put_new_email(batch, record)


def put_new_email(batch: WriteBatch, record: EmailRecord) -> None:
    """Add a new email's record and its index entries to `batch` (no message: `add_email`
    spools one too; seeded records for benchmarks have none)."""
    EMAILS.insert(batch, email_key(record.team_id, record.id), record)
    _index(batch, record)


def _index(batch: WriteBatch, record: EmailRecord) -> None:
    index_new_email(
        batch,
        team_id=record.team_id,
        email_id=record.id,
        last_event=record.last_event,
        domain_id=record.domain_id,
        api_key_id=record.api_key_id,
        recipients=record.recipients,
    )


def record_last_event(batch: WriteBatch, record: EmailRecord, event: str) -> EmailRecord:
    """Add to `batch` the record's `last_event` once `event` happened to it (a milder event
    does not replace a bounce or complaint) and its status index entry moved to match; return
    the record as it will be. Callers hold the record's lock and read `record` under it."""
    last_event = next_last_event(record.last_event, event)
    if last_event == record.last_event:
        return record
    updated = replace(record, last_event=last_event)
    EMAILS.put(batch, email_key(record.team_id, record.id), updated)
    move_status(batch, record.team_id, record.id, record.last_event, last_event)
    return updated


def get_email(spool: Spool, team_id: str, email_id: str) -> EmailRecord:
    return _found_email(EMAILS.get(spool, email_key(team_id, email_id)))


async def get_email_parked(spool: Spool, team_id: str, email_id: str) -> EmailRecord:
    """`get_email` with a parked read."""
    return _found_email(await EMAILS.aget(spool, email_key(team_id, email_id)))


def _found_email(record: EmailRecord | None) -> EmailRecord:
    if record is None:
        raise ApiError(404, "not_found", "Email not found")
    return record


def list_emails(
    spool: Spool, team_id: str, *, limit: int, after: str | None, before: str | None
) -> tuple[list[EmailRecord], bool]:
    """A page of the team's emails, newest first; `after` walks to older ones, `before` to
    newer ones, the cursor itself excluded."""
    scan = _email_page_scan(team_id, limit=limit, after=after, before=before)
    return _email_page(EMAILS.scan(spool, **scan), limit=limit, newer=before is not None)


async def list_emails_parked(
    spool: Spool, team_id: str, *, limit: int, after: str | None, before: str | None
) -> tuple[list[EmailRecord], bool]:
    """`list_emails` with a parked read."""
    scan = _email_page_scan(team_id, limit=limit, after=after, before=before)
    rows = await EMAILS.ascan(spool, **scan)
    return _email_page(rows, limit=limit, newer=before is not None)


class _EmailScan(TypedDict):
    prefix: str
    cursor: str | None
    reverse: bool
    limit: int


def _email_page_scan(
    team_id: str, *, limit: int, after: str | None, before: str | None
) -> _EmailScan:
    """The one scan of a page: one row more than the page tells whether more lie beyond."""
    prefix = f"{team_id}/"
    if before is not None:
        return _EmailScan(
            prefix=prefix, cursor=email_key(team_id, before), reverse=False, limit=limit + 1
        )
    cursor = None if after is None else email_key(team_id, after)
    return _EmailScan(prefix=prefix, cursor=cursor, reverse=True, limit=limit + 1)


def _email_page(
    rows: list[tuple[str, EmailRecord]], *, limit: int, newer: bool
) -> tuple[list[EmailRecord], bool]:
    page = [record for _, record in rows[:limit]]
    return (list(reversed(page)) if newer else page), len(rows) > limit


async def _change_scheduled(
    spool: Spool, batch: WriteBatch, updated: EmailRecord, verb: str
) -> EmailRecord:
    """Commit a change to a scheduled email's message (in `batch`) with its new record. The
    spool refuses it if delivery has already taken the message, whatever the record said."""
    EMAILS.put(batch, email_key(updated.team_id, updated.id), updated)
    move_status(batch, updated.team_id, updated.id, "scheduled", updated.last_event)
    try:
        await spool.commit(batch)
    except (LeaseLostError, NoSuchMessageError):
        raise ApiError(
            422, "validation_error", f"The email is already being sent and cannot be {verb}."
        ) from None
    return updated


def _require_scheduled(record: EmailRecord, verb: str) -> None:
    if record.last_event != "scheduled":
        raise ApiError(422, "validation_error", f"Only scheduled emails can be {verb}.")


async def reschedule_email(
    spool: Spool, record: EmailRecord, scheduled_at: str, due_at_ms: int, now_ms: int
) -> EmailRecord:
    _require_scheduled(record, "rescheduled")
    batch = WriteBatch()
    batch.reschedule(record.id, due_at_ms, now_ms)
    return await _change_scheduled(
        spool, batch, replace(record, scheduled_at=scheduled_at), "rescheduled"
    )


async def cancel_email(spool: Spool, record: EmailRecord, now_ms: int) -> EmailRecord:
    _require_scheduled(record, "canceled")
    batch = WriteBatch()
    batch.remove(record.id, now_ms)
    # Its delivery record goes with the message: no delivery will end it, and the operator's
    # queue lists delivery records (`store.deliveries` imports this module, hence the name).
    batch.delete("deliveries", record.id.encode())
    return await _change_scheduled(spool, batch, replace(record, last_event="canceled"), "canceled")


# Set in `email_index` once every email record has its index entries.
# v2: recipient entries were added, so stores indexed before them are indexed once more.
_INDEXED_MARK: Final = b"indexed/v2"
_INDEX_BATCH: Final = 2_000


async def index_earlier_emails(spool: Spool) -> int:
    """Give the email records kept before the index existed their index entries, once (a
    mark records that it was done); returns how many records were read. Run at start-up,
    before intake: an email changed while this runs could leave a stale status entry, which
    the Emails page would skip (it checks every record it lists) but not remove."""
    if spool.get(INDEX_TABLE, _INDEXED_MARK) is not None:
        return 0
    read = 0
    cursor: str | None = None
    while True:
        rows = EMAILS.scan(spool, cursor=cursor, limit=_INDEX_BATCH)
        batch = WriteBatch()
        for _, record in rows:
            _index(batch, record)
        if len(rows) < _INDEX_BATCH:
            batch.put(INDEX_TABLE, _INDEXED_MARK, b"1")
        await spool.commit(batch)
        read += len(rows)
        if len(rows) < _INDEX_BATCH:
            return read
        cursor = rows[-1][0]
