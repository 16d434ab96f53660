"""A recorder of the table reads made through a `Spool`: which keys are read, and whether
blocking (`get`, `scan`) or parked (`aget`, `ascan`). On a table store on the network a
blocking read stalls every task of the process for a round trip, so tests of the busy paths
check that theirs are parked and that no key is read twice."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from postwire.store.spool import Spool


@dataclass(frozen=True, slots=True)
class Read:
    how: str  # the facade's method: get, scan (blocking) or aget, ascan (parked)
    table: str
    key: str  # the key, or the prefix of a scan


def record_reads(spool: Spool, tables: Collection[str]) -> list[Read]:
    """Every read of `tables` made through `spool` from now on, in order."""
    reads: list[Read] = []

    def note(how: str, table: str, key: bytes = b"", **kwargs: Any) -> None:
        if table in tables:
            reads.append(Read(how, table, (key or kwargs.get("prefix", b"")).decode()))

    def wrap(how: str, read: Callable[..., Any]) -> Callable[..., Any]:
        if how.startswith("a"):

            async def parked(*args: Any, **kwargs: Any) -> Any:
                note(how, *args, **kwargs)
                return await read(*args, **kwargs)

            return parked

        def blocking(*args: Any, **kwargs: Any) -> Any:
            note(how, *args, **kwargs)
            return read(*args, **kwargs)

        return blocking

    for how in ("get", "scan", "aget", "ascan"):
        setattr(spool, how, wrap(how, getattr(spool, how)))
    return reads
