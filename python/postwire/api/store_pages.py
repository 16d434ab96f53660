"""A list endpoint's page read straight from a store table with its cursors (contract section
1.4), where `pagination.page_of` cuts a page from a list already in memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from postwire.api.pagination import PageRequest
from postwire.errors import ApiError, validation_error
from postwire.store.pages import newest_first_page, newest_first_page_parked
from postwire.store.spool import Spool
from postwire.store.tables import Table

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")


def store_page(
    table: Table[RecordT], spool: Spool, prefix: str, page: PageRequest
) -> tuple[list[tuple[str, RecordT]], bool]:
    """Rows `(id, record)` under `prefix`, newest first; a cursor naming no row is a 422."""
    for name, cursor in (("after", page.after), ("before", page.before)):
        if cursor is not None and table.get(spool, prefix + cursor) is None:
            raise _unknown_cursor(name)
    return newest_first_page(
        table, spool, prefix, after=page.after, before=page.before, limit=page.limit
    )


async def store_page_parked(
    table: Table[RecordT], spool: Spool, prefix: str, page: PageRequest
) -> tuple[list[tuple[str, RecordT]], bool]:
    """`store_page` with parked reads."""
    for name, cursor in (("after", page.after), ("before", page.before)):
        if cursor is not None and await table.aget(spool, prefix + cursor) is None:
            raise _unknown_cursor(name)
    return await newest_first_page_parked(
        table, spool, prefix, after=page.after, before=page.before, limit=page.limit
    )


def _unknown_cursor(name: str) -> ApiError:
    return validation_error(f"The `{name}` cursor does not match any item.")
