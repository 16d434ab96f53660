"""CSV imports of contacts: the job records, the uploaded files, the rows refused.

Table `contact_imports` holds several key spaces:
- `job/{team}/{import_id}`: the job (`ImportRecord`); ids are time-ordered, so a reverse scan
  of a team's prefix lists its imports newest first.
- `queue/{import_id}`: a job still to run (queued or in progress), across teams, oldest first.
- `upload/{import_id}`: a file being received; removed in the commit that queues the job, so
  one left behind belongs to an upload that was cut short (the service sweeps them).
- `bad/{import_id}/{row:010d}`: why a row was refused, the first `MAX_BAD_ROWS` of them.
- `draft/{team}/{import_id}`: a file uploaded through the dashboard whose columns are not
  mapped yet (`ImportDraft`); its upload entry stays until the draft is started or dropped.

Table `contact_import_files` holds the file itself under `{import_id}/{chunk:06d}`, never in a
loose file: it commits with the spool and goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

ImportStatus = Literal["queued", "in_progress", "completed", "failed"]
STATUSES: tuple[ImportStatus, ...] = ("queued", "in_progress", "completed", "failed")
# The bad rows an import keeps to show (row number and reason); the rest are only counted.
MAX_BAD_ROWS = 1000
# Bytes of the file per record of `contact_import_files`.
FILE_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ImportRecord:
    id: str
    team_id: str
    status: ImportStatus
    created_at: str  # contract_timestamp
    on_conflict: str  # "upsert" | "skip"
    # Contact field or `properties.<key>` -> the index of the cell it is read from in a row
    # (resolved against the header when the file was received).
    columns: dict[str, int]
    segment_ids: list[str]
    topics: dict[str, str]  # topic id -> "opt_in" | "opt_out"
    file_size: int
    completed_at: str | None = None
    failure: str | None = None  # why a failed import stopped
    # The cursor: the file offset of the next record, and its row number (the header is row
    # 1). Advanced in the commit that writes the contacts of the rows before it.
    offset: int = 0
    row: int = 1
    total: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0
    failed: int = 0
    # How the file is written (`audiences.csv_format`); records older than these fields were
    # comma-separated UTF-8.
    separator: str = ","
    encoding: str = "utf-8"


@dataclass(frozen=True, slots=True)
class QueueEntry:
    team_id: str


@dataclass(frozen=True, slots=True)
class UploadEntry:
    team_id: str
    written_at_ms: int
    chunks: int = 0


@dataclass(frozen=True, slots=True)
class ImportDraft:
    """An uploaded file waiting for its column map: what the mapping step shows."""

    id: str
    team_id: str
    created_at: str  # contract_timestamp
    created_at_ms: int
    file_name: str
    file_size: int
    header: list[str]  # the header's cells, trimmed
    header_end: int  # the file offset of row 2
    sample: list[list[str]]  # the first rows' cells
    # The format the header and sample were read in: detected at upload, or chosen since;
    # `format_sure` False when detection was a guess the page asks a person to check.
    separator: str = ","
    encoding: str = "utf-8"
    format_sure: bool = True


@dataclass(frozen=True, slots=True)
class BadRow:
    row: int
    reason: str
    email: str | None = None


IMPORTS: Table[ImportRecord] = Table("contact_imports", ImportRecord)
QUEUE: Table[QueueEntry] = Table("contact_imports", QueueEntry)
UPLOADS: Table[UploadEntry] = Table("contact_imports", UploadEntry)
BAD_ROWS: Table[BadRow] = Table("contact_imports", BadRow)
DRAFTS: Table[ImportDraft] = Table("contact_imports", ImportDraft)
# A draft left this long unmapped is dropped by the next start's sweep, with its file.
DRAFT_TTL_MS = 24 * 3600 * 1000
FILE_TABLE = "contact_import_files"


def job_key(team_id: str, import_id: str) -> str:
    return f"job/{team_id}/{import_id}"


def _chunk_key(import_id: str, chunk: int) -> bytes:
    return f"{import_id}/{chunk:06d}".encode()


def _bad_row_key(import_id: str, row: int) -> str:
    return f"bad/{import_id}/{row:010d}"


def add_file_chunk(
    batch: WriteBatch, team_id: str, import_id: str, chunk: int, data: bytes, now_ms: int
) -> None:
    """Add chunk number `chunk` of the file; the upload entry counts them, so that a sweep
    knows what to remove."""
    batch.put(FILE_TABLE, _chunk_key(import_id, chunk), data)
    UPLOADS.put(batch, f"upload/{import_id}", UploadEntry(team_id, now_ms, chunk + 1))


def queue_import(batch: WriteBatch, record: ImportRecord) -> None:
    """The upload is whole: the job is created and queued in the same commit."""
    IMPORTS.put(batch, job_key(record.team_id, record.id), record)
    QUEUE.put(batch, f"queue/{record.id}", QueueEntry(record.team_id))
    UPLOADS.delete(batch, f"upload/{record.id}")


def discard_upload(
    batch: WriteBatch, import_id: str, chunks: int, *, team_id: str | None = None
) -> None:
    """Remove an upload that was refused or cut short, with the `chunks` it stored (deleting
    one more than it knows of is harmless, and covers a commit cut short by cancellation),
    and its draft when `team_id` is given."""
    for chunk in range(chunks):
        batch.delete(FILE_TABLE, _chunk_key(import_id, chunk))
    UPLOADS.delete(batch, f"upload/{import_id}")
    if team_id is not None:
        DRAFTS.delete(batch, draft_key(team_id, import_id))


def stale_uploads(spool: Spool, older_than_ms: int) -> list[tuple[str, UploadEntry]]:
    """Uploads last written before `older_than_ms`: their request is long gone. The file of a
    draft is kept for `DRAFT_TTL_MS` after it was uploaded."""
    stale = []
    for key, entry in UPLOADS.scan(spool, prefix="upload/", limit=10_000):
        import_id = key.removeprefix("upload/")
        draft = get_draft(spool, entry.team_id, import_id)
        kept_until = entry.written_at_ms if draft is None else draft.created_at_ms + DRAFT_TTL_MS
        if kept_until < older_than_ms:
            stale.append((import_id, entry))
    return stale


def draft_key(team_id: str, import_id: str) -> str:
    return f"draft/{team_id}/{import_id}"


def get_draft(spool: Spool, team_id: str, import_id: str) -> ImportDraft | None:
    return DRAFTS.get(spool, draft_key(team_id, import_id))


def put_draft(batch: WriteBatch, draft: ImportDraft) -> None:
    """Keep the uploaded file as a draft (in the batch of its last chunk)."""
    DRAFTS.put(batch, draft_key(draft.team_id, draft.id), draft)


def start_draft(batch: WriteBatch, draft: ImportDraft, record: ImportRecord) -> None:
    """The draft's columns are mapped: its job is queued, the draft forgotten."""
    queue_import(batch, record)
    DRAFTS.delete(batch, draft_key(draft.team_id, draft.id))


def team_drafts(spool: Spool, team_id: str, limit: int) -> list[ImportDraft]:
    """The team's drafts, newest first."""
    rows = DRAFTS.scan(spool, prefix=f"draft/{team_id}/", reverse=True, limit=limit)
    return [draft for _, draft in rows]


def get_import(spool: Spool, team_id: str, import_id: str) -> ImportRecord | None:
    return IMPORTS.get(spool, job_key(team_id, import_id))


def put_import(batch: WriteBatch, record: ImportRecord) -> None:
    IMPORTS.put(batch, job_key(record.team_id, record.id), record)


def finish_import(batch: WriteBatch, record: ImportRecord, chunks: int) -> None:
    """Write the finished (completed or failed) job, take it off the queue and drop its file,
    whose rows are all in the contacts now."""
    put_import(batch, record)
    QUEUE.delete(batch, f"queue/{record.id}")
    for chunk in range(chunks):
        batch.delete(FILE_TABLE, _chunk_key(record.id, chunk))


def file_chunks(size: int) -> int:
    return -(-size // FILE_CHUNK_BYTES)


def queued_imports(spool: Spool, limit: int = 100) -> list[tuple[str, str]]:
    """(team id, import id) of the jobs still to run, oldest first."""
    return [
        (entry.team_id, key.removeprefix("queue/"))
        for key, entry in QUEUE.scan(spool, prefix="queue/", limit=limit)
    ]


def read_file(spool: Spool, import_id: str, offset: int, size: int) -> bytes:
    """Up to `size` bytes of the file from `offset` (fewer at its end)."""
    parts: list[bytes] = []
    chunk, skip = divmod(offset, FILE_CHUNK_BYTES)
    wanted = size
    while wanted > 0:
        data = spool.get(FILE_TABLE, _chunk_key(import_id, chunk))
        if data is None:
            break
        piece = data[skip : skip + wanted]
        parts.append(piece)
        wanted -= len(piece)
        chunk, skip = chunk + 1, 0
    return b"".join(parts)


def add_bad_row(batch: WriteBatch, import_id: str, bad: BadRow) -> None:
    BAD_ROWS.put(batch, _bad_row_key(import_id, bad.row), bad)


def bad_rows(spool: Spool, import_id: str) -> list[BadRow]:
    return [bad for _, bad in BAD_ROWS.scan(spool, prefix=f"bad/{import_id}/", limit=MAX_BAD_ROWS)]


def list_imports(
    spool: Spool,
    team_id: str,
    *,
    limit: int,
    after: str | None,
    before: str | None,
    status: str | None,
) -> tuple[list[ImportRecord], bool]:
    """A page of the team's imports with `status` (any when None), newest first; `after` walks
    to older ones, `before` to newer ones, the cursor excluded."""
    prefix = f"job/{team_id}/"
    newer_first = before is None
    cursor: str | None = None
    if after is not None:
        cursor = job_key(team_id, after)
    elif before is not None:
        cursor = job_key(team_id, before)
    found: list[ImportRecord] = []
    while len(found) <= limit:
        page = IMPORTS.scan(spool, prefix=prefix, cursor=cursor, reverse=newer_first, limit=100)
        found += [r for _, r in page if status is None or r.status == status]
        if len(page) < 100:
            break
        cursor = page[-1][0]
    window = found[:limit]
    return (window if newer_first else list(reversed(window))), len(found) > limit
