"""Import jobs and their files in a real spool."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.store import contact_imports as store
from postwire.store.spool import TABLES, Spool

TEAM = "0190a0a0-0000-7000-8000-000000000001"


def job(import_id: str, size: int, status: str = "queued") -> store.ImportRecord:
    return store.ImportRecord(
        id=import_id, team_id=TEAM, status=status, created_at="2026-01-01 00:00:00.000000+00",
        on_conflict="skip", columns={"email": 0}, segment_ids=[], topics={},
        file_size=size,
    )  # fmt: skip


async def test_a_file_in_chunks_a_queue_and_pages(tmp_path: Path) -> None:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        data = bytes(range(256)) * (store.FILE_CHUNK_BYTES * 5 // 2 // 256)
        import_id = _core.new_id()
        chunks = [data[i : i + store.FILE_CHUNK_BYTES]
                  for i in range(0, len(data), store.FILE_CHUNK_BYTES)]  # fmt: skip
        for number, chunk in enumerate(chunks[:-1]):
            batch = WriteBatch()
            store.add_file_chunk(batch, TEAM, import_id, number, chunk, 1000)
            await spool.commit(batch)
        assert [i for i, _ in store.stale_uploads(spool, 2000)] == [import_id]
        batch = WriteBatch()
        store.add_file_chunk(batch, TEAM, import_id, len(chunks) - 1, chunks[-1], 1000)
        store.queue_import(batch, job(import_id, len(data)))
        await spool.commit(batch)
        assert store.stale_uploads(spool, 2000) == []  # queued: no longer an upload
        assert store.file_chunks(len(data)) == len(chunks) == 3
        edge = store.FILE_CHUNK_BYTES - 10
        assert store.read_file(spool, import_id, edge, 30) == data[edge : edge + 30]
        assert store.read_file(spool, import_id, len(data) - 5, 100) == data[-5:]
        assert store.queued_imports(spool) == [(TEAM, import_id)]

        # More jobs, one finished: pages newest first, filtered by status.
        later = [_core.new_id() for _ in range(3)]
        batch = WriteBatch()
        for other in later:
            store.queue_import(batch, job(other, 0))
        await spool.commit(batch)
        batch = WriteBatch()
        done = replace(job(import_id, len(data)), status="completed")
        store.finish_import(batch, done, store.file_chunks(len(data)))
        await spool.commit(batch)
        assert store.read_file(spool, import_id, 0, 10) == b""  # the file goes with the job
        assert [i for _, i in store.queued_imports(spool)] == later

        def ids(**page: object) -> tuple[list[str], bool]:
            records, more = store.list_imports(spool, TEAM, **page)  # type: ignore[arg-type]
            return [r.id for r in records], more

        newest = list(reversed([import_id, *later]))
        assert ids(limit=2, after=None, before=None, status=None) == (newest[:2], True)
        assert ids(limit=2, after=newest[1], before=None, status=None) == (newest[2:], False)
        assert ids(limit=1, after=None, before=newest[2], status=None) == ([newest[1]], True)
        assert ids(limit=5, after=None, before=None, status="completed") == ([import_id], False)
        assert ids(limit=5, after=None, before=None, status="queued") == (newest[:3], False)
        assert store.list_imports(spool, "other-team", limit=5, after=None, before=None,
                                  status=None) == ([], False)  # fmt: skip

        # Bad rows in row order; a refused upload leaves nothing behind.
        batch = WriteBatch()
        for row in (12, 3):
            store.add_bad_row(batch, import_id, store.BadRow(row, "no", "x@example.org"))
        cut_short = _core.new_id()
        store.add_file_chunk(batch, TEAM, cut_short, 0, b"email\n", 1000)
        await spool.commit(batch)
        assert [bad.row for bad in store.bad_rows(spool, import_id)] == [3, 12]
        batch = WriteBatch()
        store.discard_upload(batch, cut_short, 1)
        await spool.commit(batch)
        assert store.read_file(spool, cut_short, 0, 10) == b""
        assert store.stale_uploads(spool, 2000) == []
        nursery.cancel_scope.cancel()
    await spool.close()
