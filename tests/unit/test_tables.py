"""Typed records over the spool's plain tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.errors import KeyExistsError, SpoolError
from postwire.store.spool import TABLES, Spool
from postwire.store.tables import Table


@dataclass(frozen=True)
class EmailRecord:
    id: str
    subject: str
    to: list[str]
    tags: dict[str, str] = field(default_factory=dict)
    scheduled_at: str | None = None


EMAILS = Table("emails", EmailRecord)
IDEMPOTENCY = Table("idempotency", EmailRecord)


async def test_records_commit_with_their_message_and_read_back(tmp_path: Path) -> None:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        record = EmailRecord("e1", "Hi ✓", ["a@example.com"], {"kind": "welcome"})
        batch = _core.WriteBatch()
        batch.enqueue("e1", b"message", 0, 0)
        EMAILS.put(batch, "team1/e1", record)
        IDEMPOTENCY.insert(batch, "team1/key", record)
        await spool.commit(batch)
        assert EMAILS.get(spool, "team1/e1") == record
        assert EMAILS.get(spool, "team1/none") is None

        again = _core.WriteBatch()
        EMAILS.put(again, "team1/e2", EmailRecord("e2", "x", []))
        IDEMPOTENCY.insert(again, "team1/key", record)
        with pytest.raises(KeyExistsError):
            await spool.commit(again)
        assert EMAILS.get(spool, "team1/e2") is None

        more = _core.WriteBatch()
        EMAILS.put(more, "team1/e0", EmailRecord("e0", "older", []))
        EMAILS.put(more, "team2/e9", EmailRecord("e9", "other team", []))
        EMAILS.delete(more, "team1/e1")
        await spool.commit(more)
        assert [key for key, _ in EMAILS.scan(spool, prefix="team1/")] == ["team1/e0"]
        nursery.cancel_scope.cancel()
    await spool.close()


def test_decoding_tolerates_added_and_removed_fields(tmp_path: Path) -> None:
    raw = b'{"id":"e1","subject":"s","to":[],"field_from_a_newer_version":1}'
    assert EMAILS.decode(raw) == EmailRecord("e1", "s", [])


def test_unknown_table_is_refused() -> None:
    with pytest.raises(SpoolError, match="unknown spool table"):
        Table("nope", EmailRecord)
