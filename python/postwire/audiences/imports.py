"""CSV imports of contacts: durable background jobs.

`serve_contact_imports` runs queued imports one at a time, oldest first. A job reads its file
from the spool a window at a time and applies its rows in slices of `SLICE_ROWS`, each slice one
commit holding the contacts it writes with their contact.* webhooks, the rows it refuses, and
the job's cursor (the byte offset and row number of the next record) with its counts. Killed at
any moment, a job resumes from the last cursor committed: no row is applied twice or skipped,
and the counts are exact. Memory holds a window of the file and one slice, whatever its size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import outcome
import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.csv_format import CsvFormat
from postwire.audiences.csv_rows import (
    MAX_RECORD_BYTES,
    ContactRow,
    CsvRecord,
    contact_row,
    new_contact,
    read_records,
    updated_contact,
)
from postwire.config import Config
from postwire.errors import KeyExistsError, SpoolFullError, StoreUnavailableError
from postwire.services import ServiceDeps
from postwire.store import contact_imports as store
from postwire.store.accounts import contract_timestamp
from postwire.store.contact_properties import team_properties
from postwire.store.contacts import (
    CONTACT_EMAILS,
    ContactRecord,
    contact_email_key,
    contact_key,
    find_contact,
    put_contact,
)
from postwire.store.outages import Outage
from postwire.store.segments import get_segment
from postwire.store.spool import Spool

log = logging.getLogger("postwire.imports")

# A slice's rows: each a contact, why it is refused, or None for a blank row.
Rows = list[ContactRow | str | None]

# Rows per commit: large enough that commits cost little per contact, small enough that a
# slice holds the event loop for a few tens of milliseconds.
SLICE_ROWS = 1000
WINDOW_BYTES = 256 * 1024
# How often the queue is looked at when idle (the API does not wake this service).
POLL_SECONDS = 0.2
# A slice whose contacts another writer keeps changing is tried this often before the import
# fails (two writers racing for one address settle at the first retry).
MAX_SLICE_ATTEMPTS = 20
# After a full spool, how long before the slice is tried again.
FULL_SPOOL_PAUSE_SECONDS = 5.0


async def serve_contact_imports(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run queued contact imports until the stage stops.

    Runs in the first process only. At start it removes uploads a previous run was receiving
    when it stopped (the API, which writes them, starts after this service). On `stopping` the
    job in hand stops after its current slice commits, to resume at the next start.
    """
    spool = deps.spool
    await _sweep_uploads(spool, spool.clock_ms())
    task_status.started()
    outage = Outage("contact imports")
    while not deps.stopping.is_set():
        try:
            queued = store.queued_imports(spool, limit=1)
        except StoreUnavailableError as error:
            await outage.wait(error, deps.stopping)
            continue
        outage.succeeded()
        if not queued:
            with trio.move_on_after(POLL_SECONDS):
                await deps.stopping.wait()
            continue
        team_id, import_id = queued[0]
        try:
            await run_import(spool, team_id, import_id, deps.stopping)
        except StoreUnavailableError as error:  # resumed from its cursor once it is back
            await outage.wait(error, deps.stopping)
        except SpoolFullError:
            log.error("the spool is full: contact import %s waits for room", import_id)
            with trio.move_on_after(FULL_SPOOL_PAUSE_SECONDS):
                await deps.stopping.wait()


async def _sweep_uploads(spool: Spool, before_ms: int) -> None:
    for import_id, upload in store.stale_uploads(spool, before_ms):
        batch = WriteBatch()
        store.discard_upload(batch, import_id, upload.chunks, team_id=upload.team_id)
        await spool.commit(batch)
        log.info("removed the upload of contact import %s, cut short", import_id)


async def run_import(spool: Spool, team_id: str, import_id: str, stopping: trio.Event) -> None:
    """Apply the import's rows from its cursor on, until the file ends or `stopping`."""
    record = store.get_import(spool, team_id, import_id)
    if record is None or record.status in ("completed", "failed"):
        batch = WriteBatch()  # a queue entry whose job is gone or done: drop it
        store.QUEUE.delete(batch, f"queue/{import_id}")
        await spool.commit(batch)
        return
    if record.status == "queued":
        record = replace(record, status="in_progress")
        batch = WriteBatch()
        store.put_import(batch, record)
        await spool.commit(batch)
    window_size = WINDOW_BYTES
    while not stopping.is_set():
        if record.offset >= record.file_size:
            await _finish(spool, record, None)
            return
        window = store.read_file(spool, import_id, record.offset, window_size)
        if not window:
            await _finish(spool, record, "The uploaded file is missing from the store.")
            return
        at_eof = record.offset + len(window) >= record.file_size
        fmt = CsvFormat(record.separator, record.encoding)
        records = read_records(window, record.offset, record.row, at_eof=at_eof, fmt=fmt)
        if not records:
            if len(window) >= MAX_RECORD_BYTES:
                reason = (
                    f"Row {record.row} is longer than 1 MiB (a quoted cell that never closes?):"
                    " the rows after it cannot be told apart."
                )
                await _finish(spool, record, reason)
                return
            window_size *= 2
            continue
        window_size = WINDOW_BYTES
        slices = [
            records[start : start + SLICE_ROWS] for start in range(0, len(records), SLICE_ROWS)
        ]
        rows = _parse_rows(spool, record, slices[0])
        for number, chunk in enumerate(slices):
            if stopping.is_set():
                return
            # The next slice's rows are read and checked while this one's commit is written.
            ahead = _ParseAhead(spool, record, slices[number + 1 : number + 2])
            try:
                record = await _apply_slice(spool, record, chunk, rows, ahead.run)
            except KeyExistsError:
                reason = (
                    f"The contacts of rows from {record.row} on kept changing under the import."
                )
                await _finish(spool, record, reason)
                return
            rows = ahead.result()


async def _finish(spool: Spool, record: store.ImportRecord, failure: str | None) -> None:
    now = datetime.fromtimestamp(spool.clock_ms() / 1000, UTC)
    done = replace(
        record,
        status="completed" if failure is None else "failed",
        completed_at=contract_timestamp(now),
        failure=failure,
    )
    batch = WriteBatch()
    store.finish_import(batch, done, store.file_chunks(record.file_size))
    await spool.commit(batch)
    log.info(
        "contact import %s %s: %d rows, %d created, %d updated, %d skipped, %d failed",
        record.id, done.status, done.total, done.created, done.updated, done.skipped,
        done.failed,
    )  # fmt: skip


async def _apply_slice(
    spool: Spool,
    record: store.ImportRecord,
    records: list[CsvRecord],
    rows: Rows,
    during_commit: Callable[[], None],
) -> store.ImportRecord:
    """Commit the rows of `records` with the cursor past the last of them; the job as written.

    The contacts the rows name are locked while read, changed and committed. A contact the
    slice creates whose address another writer took meanwhile fails the commit: the slice is
    read again and applied anew, as is one that finds a contact it did not lock."""
    for _ in range(MAX_SLICE_ATTEMPTS - 1):
        try:
            applied = await _try_slice(spool, record, records, rows, during_commit)
        except KeyExistsError:
            applied = None
        if applied is not None:
            return applied
    # The last try lets its error out.
    applied = await _try_slice(spool, record, records, rows, during_commit)
    if applied is None:
        raise KeyExistsError("the slice's contacts keep changing under it")
    return applied


@dataclass(slots=True)
class _SliceCounts:
    total: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0
    failed: int = 0


async def _try_slice(
    spool: Spool,
    record: store.ImportRecord,
    records: list[CsvRecord],
    rows: Rows,
    during_commit: Callable[[], None],
) -> store.ImportRecord | None:
    team = record.team_id
    emails = {row.email.lower() for row in rows if isinstance(row, ContactRow)}
    # The address index tells which contacts to lock; they are read once locked.
    indexed = (CONTACT_EMAILS.get(spool, contact_email_key(team, e)) for e in emails)
    seen = {entry.contact_id for entry in indexed if entry is not None}
    async for attempt in spool.guarded(contact_key(team, contact_id) for contact_id in seen):
        with attempt:
            contacts = _contacts_by_address(spool, team, emails)
            if not {c.id for c in contacts.values()} <= seen:
                return None  # a contact was created meanwhile: lock it too
            now_ms = spool.clock_ms()
            now = contract_timestamp(datetime.fromtimestamp(now_ms / 1000, UTC))
            batch = WriteBatch()
            counts = _SliceCounts()
            found = [s for s in record.segment_ids if get_segment(spool, team, s) is not None]
            for csv_record, row in zip(records, rows, strict=True):
                if row is None:
                    continue  # a blank row
                counts.total += 1
                if isinstance(row, str):
                    counts.failed += 1
                    if record.failed + counts.failed <= store.MAX_BAD_ROWS:
                        email = _email_cell(record, csv_record)
                        store.add_bad_row(
                            batch, record.id, store.BadRow(csv_record.row, row, email)
                        )
                    continue
                address = row.email.lower()
                previous = contacts.get(address)
                if previous is None:
                    contact = new_contact(row, _core.new_id(), team, now, record.segment_ids,
                                          record.topics)  # fmt: skip
                    contacts[address] = put_contact(
                        batch, spool, None, contact, now_ms, event="contact.created",
                        segments_found=found,
                    )  # fmt: skip
                    counts.created += 1
                elif record.on_conflict == "skip":
                    counts.skipped += 1
                else:
                    changed = updated_contact(previous, row, now, record.segment_ids, record.topics)
                    if changed is not None:
                        contacts[address] = put_contact(
                            batch, spool, previous, changed, now_ms, event="contact.updated",
                            segments_found=found,
                        )  # fmt: skip
                    counts.updated += 1
            last = records[-1]
            advanced = replace(
                record,
                offset=last.end,
                row=last.row + 1,
                total=record.total + counts.total,
                created=record.created + counts.created,
                updated=record.updated + counts.updated,
                skipped=record.skipped + counts.skipped,
                failed=record.failed + counts.failed,
            )
            store.put_import(batch, advanced)
            await _commit_while(spool, batch, during_commit)
    return advanced


async def _commit_while(spool: Spool, batch: WriteBatch, work: Callable[[], None]) -> None:
    """Commit `batch`, doing `work` while the spool's committer thread writes it (the GIL is
    free meanwhile): the commit is submitted before `work` starts."""
    committed = _Commit()
    async with trio.open_nursery() as nursery:
        await nursery.start(committed.run, spool, batch)
        work()
        await committed.done.wait()
    assert committed.result is not None
    committed.result.unwrap()


class _Commit:
    """A commit run in its own task, its outcome kept for the task that waits for it."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: outcome.Outcome[object] | None = None

    async def run(
        self, spool: Spool, batch: WriteBatch, task_status: trio.TaskStatus[None]
    ) -> None:
        task_status.started()  # the parent runs again at the commit's first wait, once submitted
        self.result = await outcome.acapture(spool.commit, batch)
        self.done.set()


@dataclass(slots=True)
class _ParseAhead:
    """Reads and checks the rows of the next slice (none: nothing to do) once, when asked."""

    spool: Spool
    record: store.ImportRecord
    chunks: list[list[CsvRecord]]
    rows: Rows | None = None

    def run(self) -> None:
        if self.rows is None and self.chunks:
            self.rows = _parse_rows(self.spool, self.record, self.chunks[0])

    def result(self) -> Rows:
        self.run()
        return self.rows or []


def _parse_rows(spool: Spool, record: store.ImportRecord, records: list[CsvRecord]) -> Rows:
    """The rows of a slice, checked against the team's contact properties as they are now."""
    props = team_properties(spool, record.team_id)
    kinds = {key: prop.type for key, prop in props.items()}
    return [_row_of(record, csv_record, kinds) for csv_record in records]


def _row_of(
    record: store.ImportRecord, csv_record: CsvRecord, kinds: dict[str, str]
) -> ContactRow | str | None:
    """The row's contact, why it is refused, or None for a blank row."""
    if csv_record.problem is not None:
        return csv_record.problem
    if not csv_record.cells:
        return None
    return contact_row(csv_record.cells, record.columns, kinds)


def _email_cell(record: store.ImportRecord, csv_record: CsvRecord) -> str | None:
    index = record.columns.get("email")
    if index is None or index >= len(csv_record.cells):
        return None
    return csv_record.cells[index].strip() or None


def _contacts_by_address(
    spool: Spool, team_id: str, addresses: set[str]
) -> dict[str, ContactRecord]:
    found = {address: find_contact(spool, team_id, address) for address in addresses}
    return {address: contact for address, contact in found.items() if contact is not None}
