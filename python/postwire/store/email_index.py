"""Secondary indexes of emails, for the dashboard's filters: table "email_index".

Keys, each with an empty value (the email's id ends the key):

    s/<team_id>/<last_event>/<email_id>   the email's status; moved when `last_event` changes
    d/<team_id>/<domain_id>/<email_id>    the domain it was sent from
    k/<team_id>/<api_key_id>/<email_id>   the API key that sent it (none for broadcasts)
    e/<team_id>/<email_id>/<event_id>     its events, so its page does not scan the team's
    r/<team_id>/<address>/<email_id>      each envelope recipient (to, cc, bcc; lower case), so
                                          a contact's page lists the emails sent to it

Email ids are UUIDv7 (time-ordered), so every prefix above lists its emails in creation order
and a date range is a key range. Entries are written in the commit that writes or changes the
email record (`store/emails.py`), so an index never disagrees with the records it points to.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from typing import Final

from postwire._core import WriteBatch
from postwire.concurrency import in_order
from postwire.store.spool import Spool

TABLE: Final = "email_index"
STATUS: Final = "s"
DOMAIN: Final = "d"
API_KEY: Final = "k"
EVENT: Final = "e"
RECIPIENT: Final = "r"
# Parked reads one call keeps waiting at once.
READS_AT_ONCE: Final = 8


def index_prefix(kind: str, team_id: str, value: str) -> str:
    """The prefix under which the team's emails with `value` (of index `kind`) are listed."""
    return f"{kind}/{team_id}/{value}/"


def _key(kind: str, team_id: str, value: str, email_id: str) -> bytes:
    return f"{kind}/{team_id}/{value}/{email_id}".encode()


def index_new_email(
    batch: WriteBatch,
    *,
    team_id: str,
    email_id: str,
    last_event: str,
    domain_id: str,
    api_key_id: str | None,
    recipients: Iterable[str] = (),
) -> None:
    """Add a new email's index entries to `batch` (the batch that adds its record): inserts,
    since they are new, so undoing the batch needs no read of what was there."""
    batch.insert(TABLE, _key(STATUS, team_id, last_event, email_id), b"")
    batch.insert(TABLE, _key(DOMAIN, team_id, domain_id, email_id), b"")
    if api_key_id is not None:
        batch.insert(TABLE, _key(API_KEY, team_id, api_key_id, email_id), b"")
    for address in {address.lower() for address in recipients}:
        batch.insert(TABLE, _key(RECIPIENT, team_id, address, email_id), b"")


def emails_sent_to(spool: Spool, team_id: str, address: str, limit: int) -> list[str]:
    """The ids of the team's newest emails with `address` (any case) among their envelope
    recipients, newest first."""
    prefix = index_prefix(RECIPIENT, team_id, address.lower()).encode()
    rows = spool.scan(TABLE, prefix=prefix, reverse=True, limit=limit)
    return [key[len(prefix) :].decode() for key, _ in rows]


async def emails_sent_to_parked(spool: Spool, team_id: str, address: str, limit: int) -> list[str]:
    """`emails_sent_to`, parked rather than blocking on a table store on the network."""
    prefix = index_prefix(RECIPIENT, team_id, address.lower()).encode()
    rows = await spool.ascan(TABLE, prefix=prefix, reverse=True, limit=limit)
    return [key[len(prefix) :].decode() for key, _ in rows]


async def with_status_parked(
    spool: Spool, team_id: str, status: str, email_ids: Sequence[str]
) -> list[str]:
    """Those of the team's `email_ids` whose status is `status`, in their order (reads parked,
    their round trips overlapping)."""

    async def has_status(email_id: str) -> bool:
        return await spool.aget(TABLE, _key(STATUS, team_id, status, email_id)) is not None

    found = await in_order(has_status, email_ids, at_once=READS_AT_ONCE)
    return [email_id for email_id, has in zip(email_ids, found, strict=True) if has]


def move_status(batch: WriteBatch, team_id: str, email_id: str, old: str, new: str) -> None:
    """Move the email's status entry from `old` to `new` in `batch` (with its record's change)."""
    if old == new:
        return
    batch.delete(TABLE, _key(STATUS, team_id, old, email_id))
    batch.put(TABLE, _key(STATUS, team_id, new, email_id), b"")


def index_email_event(batch: WriteBatch, team_id: str, email_id: str, event_id: str) -> None:
    """Point the email at one of its events, in the batch that adds the event."""
    batch.put(TABLE, _key(EVENT, team_id, email_id, event_id), b"")


def indexed_event_ids(spool: Spool, team_id: str, email_id: str, limit: int) -> list[str]:
    """The ids of the email's indexed events, oldest first."""
    prefix = index_prefix(EVENT, team_id, email_id).encode()
    rows = spool.scan(TABLE, prefix=prefix, limit=limit)
    return [key[len(prefix) :].decode() for key, _ in rows]


async def indexed_event_ids_parked(
    spool: Spool, team_id: str, email_id: str, limit: int
) -> list[str]:
    """`indexed_event_ids`, parked rather than blocking on a table store on the network."""
    prefix = index_prefix(EVENT, team_id, email_id).encode()
    rows = await spool.ascan(TABLE, prefix=prefix, limit=limit)
    return [key[len(prefix) :].decode() for key, _ in rows]


async def index_id_chunks(
    spool: Spool, prefix: str, cursor: str | None, *, reverse: bool, chunk: int
) -> AsyncGenerator[list[str], None]:
    """Email ids listed under `prefix`, strictly after `cursor` (an email id or an id bound) in
    key order or `reverse`d, `chunk` keys a parked read; the caller stops when it has enough."""
    raw_prefix = prefix.encode()
    raw_cursor = None if cursor is None else raw_prefix + cursor.encode()
    while True:
        rows = await spool.ascan(
            TABLE, prefix=raw_prefix, cursor=raw_cursor, reverse=reverse, limit=chunk
        )
        yield [key[len(raw_prefix) :].decode() for key, _ in rows]
        if len(rows) < chunk:
            return
        raw_cursor = rows[-1][0]
