"""Typed records in the spool's plain tables.

A `Table` pairs a table name with a frozen dataclass. Records are stored as compact JSON, so
their fields must be JSON values (str, int, float, bool, None, and lists or dicts of those).
Writes are added to a `WriteBatch`, so a record commits together with whatever else the batch
holds (a message, an idempotency key); reads go straight to the spool.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import orjson

from postwire._core import WriteBatch
from postwire.errors import SpoolError
from postwire.store.spool import TABLES, Spool

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class Table(Generic[RecordT]):
    """The records of type `record` kept in spool table `name`, by string key."""

    name: str
    record: type[RecordT]

    def __post_init__(self) -> None:
        if self.name not in TABLES:
            raise SpoolError(f"unknown spool table {self.name!r}")
        if not dataclasses.is_dataclass(self.record):
            raise TypeError(f"{self.record!r} is not a dataclass")

    def encode(self, record: RecordT) -> bytes:
        # A shallow field map (records hold JSON values only) and orjson: encoding email
        # records was a fifth of the batch endpoint's profile with asdict and the stdlib.
        return orjson.dumps({name: getattr(record, name) for name in record.__dataclass_fields__})

    def decode(self, raw: bytes) -> RecordT:
        fields = orjson.loads(raw)
        # Fields written by a newer version are dropped; missing ones take their defaults. The
        # check is one set comparison: listing the fields on every decode was 7% of the
        # webhook dispatcher's time.
        known = self.record.__dataclass_fields__
        if not fields.keys() <= known.keys():
            fields = {k: v for k, v in fields.items() if k in known}
        return self.record(**fields)

    def get(self, spool: Spool, key: str) -> RecordT | None:
        raw = spool.get(self.name, key.encode())
        return None if raw is None else self.decode(raw)

    async def aget(self, spool: Spool, key: str) -> RecordT | None:
        """`get`, parked rather than blocking while a table store on the network answers."""
        raw = await spool.aget(self.name, key.encode())
        return None if raw is None else self.decode(raw)

    def scan(
        self,
        spool: Spool,
        *,
        prefix: str = "",
        cursor: str | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[str, RecordT]]:
        """Records whose key starts with `prefix`, in key order (or reversed), after `cursor`."""
        rows = spool.scan(
            self.name,
            prefix=prefix.encode(),
            cursor=None if cursor is None else cursor.encode(),
            reverse=reverse,
            limit=limit,
        )
        return [(key.decode(), self.decode(raw)) for key, raw in rows]

    async def ascan(
        self,
        spool: Spool,
        *,
        prefix: str = "",
        cursor: str | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[str, RecordT]]:
        """`scan`, parked rather than blocking while a table store on the network answers."""
        rows = await spool.ascan(
            self.name,
            prefix=prefix.encode(),
            cursor=None if cursor is None else cursor.encode(),
            reverse=reverse,
            limit=limit,
        )
        return [(key.decode(), self.decode(raw)) for key, raw in rows]

    def put(self, batch: WriteBatch, key: str, record: RecordT) -> None:
        batch.put(self.name, key.encode(), self.encode(record))

    def insert(self, batch: WriteBatch, key: str, record: RecordT) -> None:
        """Add `record` only if `key` is free; else the batch fails with `KeyExistsError`."""
        batch.insert(self.name, key.encode(), self.encode(record))

    def delete(self, batch: WriteBatch, key: str) -> None:
        batch.delete(self.name, key.encode())
