"""One page of a table's records under a prefix, newest first, read with the store's cursors.

Ids are UUID v7, so keys `{prefix}{id}` sort in creation order: a reverse scan is newest first,
and the contract's `after` (toward older items) and `before` (toward newer ones) are scan
cursors. Nothing beyond the page (and one more row, to tell `has_more`) is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypedDict, TypeVar

from postwire.store.spool import Spool
from postwire.store.tables import Table

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")

# Rows read per scan when a page has no limit (the legacy lists return everything).
UNLIMITED_CHUNK = 1000


Rows = list[tuple[str, RecordT]]


def newest_first_page(
    table: Table[RecordT],
    spool: Spool,
    prefix: str,
    *,
    after: str | None,
    before: str | None,
    limit: int | None,
) -> tuple[Rows[RecordT], bool]:
    """Rows `(id, record)` of keys `prefix + id`, newest first, strictly older than `after` or
    strictly newer than `before`; at most `limit` (None: all), and whether more lie beyond."""
    pager = _Pager[RecordT](prefix, after=after, before=before, limit=limit)
    while (scan := pager.next_scan()) is not None:
        pager.take(table.scan(spool, prefix=prefix, **scan))
    return pager.page()


async def newest_first_page_parked(
    table: Table[RecordT],
    spool: Spool,
    prefix: str,
    *,
    after: str | None,
    before: str | None,
    limit: int | None,
) -> tuple[Rows[RecordT], bool]:
    """`newest_first_page` with parked reads."""
    pager = _Pager[RecordT](prefix, after=after, before=before, limit=limit)
    while (scan := pager.next_scan()) is not None:
        pager.take(await table.ascan(spool, prefix=prefix, **scan))
    return pager.page()


class _Scan(TypedDict):
    cursor: str | None
    reverse: bool
    limit: int


class _Pager(Generic[RecordT]):
    """The scans of one page, one after another, and the page they make: the paging the
    blocking and the parked readers share."""

    def __init__(
        self, prefix: str, *, after: str | None, before: str | None, limit: int | None
    ) -> None:
        self.prefix, self.limit = prefix, limit
        self.toward_newer = before is not None
        cursor_id = before if self.toward_newer else after
        self.cursor = None if cursor_id is None else prefix + cursor_id
        self.rows: Rows[RecordT] = []
        self.done = False

    def wanted(self) -> int:
        return UNLIMITED_CHUNK if self.limit is None else self.limit + 1 - len(self.rows)

    def next_scan(self) -> _Scan | None:
        if self.done:
            return None
        return _Scan(cursor=self.cursor, reverse=not self.toward_newer, limit=self.wanted())

    def take(self, chunk: Rows[RecordT]) -> None:
        wanted = self.wanted()
        self.rows += [(key[len(self.prefix) :], record) for key, record in chunk]
        self.done = len(chunk) < wanted or (self.limit is not None and len(self.rows) > self.limit)
        if chunk:
            self.cursor = chunk[-1][0]

    def page(self) -> tuple[Rows[RecordT], bool]:
        rows = self.rows
        has_more = self.limit is not None and len(rows) > self.limit
        if has_more:
            rows = rows[: self.limit]
        if self.toward_newer:
            rows = rows[::-1]
        return rows, has_more
