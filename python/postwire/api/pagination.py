"""Cursor pagination of list endpoints (contract section 1.4): `limit`, `after`, `before`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from postwire.api.models import ListBody
from postwire.api.resource_ids import is_resource_id
from postwire.errors import validation_error

ItemT = TypeVar("ItemT")

LIMIT_MESSAGE = "The pagination limit must be a number between 1 and 100."


@dataclass(frozen=True, slots=True)
class PageRequest:
    limit: int | None
    after: str | None
    before: str | None


def parse_page_request(args: Mapping[str, str], *, default_limit: int | None) -> PageRequest:
    """Validate the query. `default_limit` None means "everything" (the legacy list endpoints).

    A cursor is an item's id: anything else is refused, where a store's ordered scan would have
    read it as a position (`after=zzz` sorts past every id: page one again)."""
    raw_limit = args.get("limit")
    limit = default_limit
    if raw_limit is not None:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise validation_error(LIMIT_MESSAGE) from None
        if not 1 <= limit <= 100:
            raise validation_error(LIMIT_MESSAGE)
    after, before = args.get("after") or None, args.get("before") or None
    if after and before:
        raise validation_error("The `after` and `before` parameters cannot be used together.")
    for name, cursor in (("after", after), ("before", before)):
        if cursor is not None and not is_resource_id(cursor):
            raise validation_error(f"The `{name}` cursor must be the id of an item in the list.")
    return PageRequest(limit, after, before)


def page_of(
    items: Sequence[ItemT], page: PageRequest, id_of: Callable[[ItemT], str]
) -> tuple[list[ItemT], bool]:
    """Cut one page from `items` (newest first). `after` walks toward older items, `before`
    toward newer ones; the cursor item itself is excluded. An unknown cursor is an error."""
    ids = [id_of(item) for item in items]
    start, end = 0, len(items)
    if page.after is not None:
        if page.after not in ids:
            raise validation_error("The `after` cursor does not match any item.")
        start = ids.index(page.after) + 1
    if page.before is not None:
        if page.before not in ids:
            raise validation_error("The `before` cursor does not match any item.")
        end = ids.index(page.before)
    window = list(items[start:end])
    if page.limit is None or len(window) <= page.limit:
        return window, False
    if page.before is not None:  # the page nearest the cursor
        return window[-page.limit :], True
    return window[: page.limit], True


def list_response(data: list[dict[str, Any]], has_more: bool) -> ListBody:
    return {"object": "list", "has_more": has_more, "data": data}
