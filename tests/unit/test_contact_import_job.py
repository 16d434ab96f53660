"""An import job over a real spool: slices committed with their cursor, a stop midway and a
second run that finishes with exact counts, upsert and skip, the rows refused."""

from __future__ import annotations

import pytest
import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences import imports
from postwire.audiences.csv_rows import ContactRow, new_contact, updated_contact
from postwire.store import contact_imports as store
from postwire.store import segments
from postwire.store.contacts import CONTACTS, ContactRecord, find_contact, put_contact
from postwire.store.deliveries import EVENTS
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix

TEAM = "0190a0a0-0000-7000-8000-0000000000aa"
STAMP = "2026-11-25 10:00:00.123000+00"


async def queue(spool: Spool, data: bytes, on_conflict: str, segment_ids: list[str]) -> str:
    """The job as the API queues it: columns email, first_name; the header already read."""
    import_id = _core.new_id()
    batch = WriteBatch()
    for number, start in enumerate(range(0, len(data), store.FILE_CHUNK_BYTES)):
        chunk = data[start : start + store.FILE_CHUNK_BYTES]
        store.add_file_chunk(batch, TEAM, import_id, number, chunk, 0)
    header_end = data.index(b"\n") + 1
    store.queue_import(batch, store.ImportRecord(
        id=import_id, team_id=TEAM, status="queued", created_at=STAMP, on_conflict=on_conflict,
        columns={"email": 0, "first_name": 1}, segment_ids=segment_ids, topics={},
        file_size=len(data), offset=header_end, row=2,
    ))  # fmt: skip
    await spool.commit(batch)
    return import_id


def team_contacts(spool: Spool) -> list[ContactRecord]:
    return [c for _, c in CONTACTS.scan(spool, prefix=team_prefix(TEAM), limit=10_000)]


async def test_a_stopped_import_resumes_at_its_cursor_with_exact_counts(
    spool: Spool, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = segments.SegmentRecord(_core.new_id(), TEAM, "news", STAMP)
    batch = WriteBatch()
    segments.put_segment(batch, segment)
    await spool.commit(batch)
    lines = [f"u{i}@example.org,U{i}" for i in range(25)]
    lines[7] = "not-an-address,X"
    lines[12] = "u3@example.org,Again"  # a duplicate of row 5: upserted
    lines[20] = ""  # blank: not a row of the total
    data = ("email,first_name\n" + "\n".join(lines) + "\n").encode()
    import_id = await queue(spool, data, "upsert", [segment.id])

    monkeypatch.setattr(imports, "SLICE_ROWS", 4)
    stopping = trio.Event()
    applied = imports._apply_slice
    slices = 0

    async def stop_after_three(*args: object) -> store.ImportRecord:
        nonlocal slices
        slices += 1
        if slices == 3:
            stopping.set()
        return await applied(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(imports, "_apply_slice", stop_after_three)
    await imports.run_import(spool, TEAM, import_id, stopping)
    halfway = store.get_import(spool, TEAM, import_id)
    assert halfway is not None
    assert (halfway.status, halfway.row, halfway.total) == ("in_progress", 14, 12)
    assert len(team_contacts(spool)) == 11  # 12 rows, one refused

    await imports.run_import(spool, TEAM, import_id, trio.Event())
    done = store.get_import(spool, TEAM, import_id)
    assert done is not None and done.status == "completed" and done.completed_at
    counts = (done.total, done.created, done.updated, done.skipped, done.failed)
    assert counts == (24, 22, 1, 0, 1)
    contacts = team_contacts(spool)
    assert len(contacts) == len({c.email for c in contacts}) == 22
    again = find_contact(spool, TEAM, "u3@example.org")
    assert again is not None and again.first_name == "Again"
    assert segments.segment_member_count(spool, TEAM, segment.id) == 22
    assert [(b.row, b.email) for b in store.bad_rows(spool, import_id)] == [(9, "not-an-address")]
    events = [e.type for _, e in EVENTS.scan(spool, prefix=f"{TEAM}/", limit=1000)]
    assert events.count("contact.created") == 22 and events.count("contact.updated") == 1
    assert store.queued_imports(spool) == []
    assert store.read_file(spool, import_id, 0, 10) == b""  # the file goes with the job


async def test_skip_leaves_existing_contacts_alone(spool: Spool) -> None:
    existing = ContactRecord(_core.new_id(), TEAM, "Ann@Example.org", "Ann", None, False,
                             STAMP, STAMP)  # fmt: skip
    batch = WriteBatch()
    put_contact(batch, spool, None, existing, 0, event=None)
    await spool.commit(batch)
    data = b"email,first_name\nann@example.org,Changed\nbo@example.org,Bo\nbo@example.org,Bob\n"
    import_id = await queue(spool, data, "skip", [])
    await imports.run_import(spool, TEAM, import_id, trio.Event())
    done = store.get_import(spool, TEAM, import_id)
    assert done is not None
    assert (done.total, done.created, done.updated, done.skipped) == (3, 1, 0, 2)
    assert find_contact(spool, TEAM, "ann@example.org") == existing
    bo = find_contact(spool, TEAM, "bo@example.org")
    assert bo is not None and bo.first_name == "Bo"


async def test_a_quote_that_never_closes_fails_the_import(spool: Spool) -> None:
    data = b'email,first_name\na@example.org,"open\n' + b"x" * (1024 * 1024 + 10) + b"\n"
    import_id = await queue(spool, data, "skip", [])
    await imports.run_import(spool, TEAM, import_id, trio.Event())
    done = store.get_import(spool, TEAM, import_id)
    assert done is not None and done.status == "failed"
    assert done.failure is not None and "Row 2" in done.failure


def test_an_upserting_row_changes_only_what_its_cells_hold() -> None:
    row = ContactRow("a@example.org", "Ann", None, None, {"plan": "pro"})
    created = new_contact(row, "id-1", TEAM, STAMP, ["s1"], {"t1": "opt_in"})
    assert (created.first_name, created.last_name, created.unsubscribed) == ("Ann", None, False)
    assert (created.segment_ids, created.topics) == (["s1"], {"t1": "opt_in"})
    later = "2026-11-26 10:00:00.000000+00"
    assert updated_contact(created, row, later, ["s1"], {"t1": "opt_in"}) is None
    changed = updated_contact(
        created, ContactRow("A@example.org", None, "Lee", True, {"age": 3}), later, ["s2"], {}
    )
    assert changed is not None
    assert (changed.email, changed.first_name, changed.last_name) == ("a@example.org", "Ann", "Lee")
    assert changed.unsubscribed and changed.properties == {"plan": "pro", "age": 3}
    assert (changed.segment_ids, changed.updated_at) == (["s1", "s2"], later)
