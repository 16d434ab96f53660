"""A team's records of one kind, each under `{team}/{id}`: segments, topics, contact
properties and contacts share this key shape (ids are UUID v7, so keys sort by creation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table


class TeamOwned(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def team_id(self) -> str: ...


RecordT = TypeVar("RecordT", bound=TeamOwned)


def team_key(team_id: str, record_id: str) -> str:
    return f"{team_id}/{record_id}"


def team_prefix(team_id: str) -> str:
    return f"{team_id}/"


@dataclass(frozen=True, slots=True)
class TeamRecords(Generic[RecordT]):
    table: Table[Any]  # of RecordT, a dataclass

    def get(self, spool: Spool, team_id: str, record_id: str) -> RecordT | None:
        record: RecordT | None = self.table.get(spool, team_key(team_id, record_id))
        return record

    async def aget(self, spool: Spool, team_id: str, record_id: str) -> RecordT | None:
        """`get`, parked rather than blocking on a table store on the network."""
        record: RecordT | None = await self.table.aget(spool, team_key(team_id, record_id))
        return record

    def put(self, batch: WriteBatch, record: RecordT) -> None:
        self.table.put(batch, team_key(record.team_id, record.id), record)

    def delete(self, batch: WriteBatch, record: RecordT) -> None:
        self.table.delete(batch, team_key(record.team_id, record.id))
