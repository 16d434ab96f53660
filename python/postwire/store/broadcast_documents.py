"""The block documents the dashboard's editor writes, one per broadcast that has one.

Keys (the team first, so no read crosses teams):

    broadcast_documents   {team}/{broadcast}   DocumentRecord

A document is saved together with the broadcast record's rendered `html` and `text` in one
batch (`broadcasts.documents.save_document`), so the two never disagree. A broadcast created
through the REST API with its own HTML has no document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import team_key


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    team_id: str
    broadcast_id: str
    document: dict[str, Any]  # the JSON of `broadcasts.blocks`, validated before it is written
    # Counts the saves: an editor sends the revision it started from, and a save based on an
    # older one (another tab saved since) is refused instead of silently undoing that save.
    revision: int
    updated_at: str  # store.accounts.contract_timestamp
    # SHA-256 of the HTML this save rendered: a broadcast whose HTML no longer matches had it
    # replaced through the API since ("" for records written before the digest was kept).
    html_digest: str = ""


BROADCAST_DOCUMENTS = Table("broadcast_documents", DocumentRecord)


def get_document(spool: Spool, team_id: str, broadcast_id: str) -> DocumentRecord | None:
    return BROADCAST_DOCUMENTS.get(spool, team_key(team_id, broadcast_id))


async def get_document_parked(
    spool: Spool, team_id: str, broadcast_id: str
) -> DocumentRecord | None:
    """`get_document`, parked rather than blocking on a table store on the network."""
    return await BROADCAST_DOCUMENTS.aget(spool, team_key(team_id, broadcast_id))


def put_document(batch: WriteBatch, record: DocumentRecord) -> None:
    BROADCAST_DOCUMENTS.put(batch, team_key(record.team_id, record.broadcast_id), record)


def delete_document(batch: WriteBatch, team_id: str, broadcast_id: str) -> None:
    BROADCAST_DOCUMENTS.delete(batch, team_key(team_id, broadcast_id))
