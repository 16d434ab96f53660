"""One page of a table's records under a prefix, newest first, read with the store's cursors.

Ids are UUID v7, so keys `{prefix}{id}` sort in creation order: a reverse scan is newest first,
and the contract's `after` (toward older items) and `before` (toward newer ones) are scan
cursors. Nothing beyond the page (and one more row, to tell `has_more`) is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from postwire.store.spool import Spool
from postwire.store.tables import Table

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")

# Rows read per scan when a page has no limit (the legacy lists return everything).
UNLIMITED_CHUNK = 1000


def newest_first_page(
    table: Table[RecordT],
    spool: Spool,
    prefix: str,
    *,
    after: str | None,
    before: str | None,
    limit: int | None,
) -> tuple[list[tuple[str, RecordT]], bool]:
    """Rows `(id, record)` of keys `prefix + id`, newest first, strictly older than `after` or
    strictly newer than `before`; at most `limit` (None: all), and whether more lie beyond."""
    toward_newer = before is not None
    cursor_id = before if toward_newer else after
    cursor = None if cursor_id is None else prefix + cursor_id
    rows: list[tuple[str, RecordT]] = []
    while True:
        wanted = UNLIMITED_CHUNK if limit is None else limit + 1 - len(rows)
        chunk = table.scan(
            spool, prefix=prefix, cursor=cursor, reverse=not toward_newer, limit=wanted
        )
        rows += [(key[len(prefix) :], record) for key, record in chunk]
        if len(chunk) < wanted or (limit is not None and len(rows) > limit):
            break
        cursor = chunk[-1][0]
    has_more = limit is not None and len(rows) > limit
    if has_more:
        rows = rows[:limit]
    if toward_newer:
        rows.reverse()
    return rows, has_more
