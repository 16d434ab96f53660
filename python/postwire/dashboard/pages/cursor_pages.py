"""One page of a short list held whole in memory (a team's suppressions, an endpoint's
events), continued from the id of the last row shown: `?after=<id>` links work without
JavaScript and stay right while rows are added at the top."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def page_after(
    rows: Sequence[T], after: str | None, id_of: Callable[[T], str], size: int
) -> tuple[list[T], str | None]:
    """Up to `size` rows following the row whose id is `after` (from the top without it; none
    if that row is gone), and the id to continue after, or None on the last page."""
    start = 0
    if after is not None:
        ids = [id_of(row) for row in rows]
        start = ids.index(after) + 1 if after in ids else len(rows)
    shown = list(rows[start : start + size])
    more = start + size < len(rows)
    return shown, id_of(shown[-1]) if more and shown else None
