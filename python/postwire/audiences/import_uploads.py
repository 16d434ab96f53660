"""A CSV file of contacts on its way into the spool, and the import job it becomes: shared by
the REST API (which streams a multipart body and queues the job at once) and the dashboard
(which keeps the file as a draft until its columns are mapped).

The file goes into the spool one 1 MiB chunk per commit, so memory holds a chunk and not the
file; a file larger than `MAX_FILE_BYTES` is refused (413) as soon as it passes that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import trio

from postwire._core import WriteBatch
from postwire.audiences.contact_rules import segment_ids, topic_choices
from postwire.audiences.csv_format import DEFAULT_FORMAT, CsvFormat, DetectedFormat, detect_format
from postwire.audiences.csv_rows import (
    MAX_RECORD_BYTES,
    CsvRecord,
    column_indexes,
    read_header,
    read_records,
    resolve_columns,
)
from postwire.errors import ApiError, validation_error
from postwire.store import contact_imports as store
from postwire.store.accounts import contract_timestamp
from postwire.store.contact_properties import team_properties
from postwire.store.segments import get_segment
from postwire.store.spool import Spool
from postwire.store.topics import get_topic

MAX_FILE_BYTES = 50 * 1024 * 1024
ON_CONFLICT = ("upsert", "skip")
DEFAULT_ON_CONFLICT = "skip"  # the SDKs' documented default

TOO_LARGE = ApiError(
    413, "validation_error", f"The CSV file must be at most 50 MB ({MAX_FILE_BYTES} bytes)."
)


@dataclass(slots=True)
class ImportUpload:
    """The file of one import as it streams into the spool."""

    spool: Spool
    team_id: str
    import_id: str
    now_ms: Callable[[], int]
    size: int = 0
    chunks: int = 0  # committed
    pending: bytearray = field(default_factory=bytearray)
    head: bytearray = field(default_factory=bytearray)  # the first bytes: the header

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > MAX_FILE_BYTES:
            raise TOO_LARGE
        if len(self.head) < MAX_RECORD_BYTES:
            self.head += data[: MAX_RECORD_BYTES - len(self.head)]
        self.pending += data
        while len(self.pending) >= store.FILE_CHUNK_BYTES:
            batch = WriteBatch()
            chunk = bytes(self.pending[: store.FILE_CHUNK_BYTES])
            store.add_file_chunk(batch, self.team_id, self.import_id, self.chunks, chunk,
                                 self.now_ms())  # fmt: skip
            await self.spool.commit(batch)
            self.chunks += 1
            del self.pending[: store.FILE_CHUNK_BYTES]

    def finish(self, batch: WriteBatch) -> None:
        """Add the last chunk to `batch`, the one that queues the job (or keeps the draft)."""
        if self.pending:
            store.add_file_chunk(batch, self.team_id, self.import_id, self.chunks,
                                 bytes(self.pending), self.now_ms())  # fmt: skip

    async def discard(self) -> None:
        """Remove what a refused or broken upload stored, unless its last commit went through."""
        with trio.CancelScope(shield=True):
            if store.get_import(self.spool, self.team_id, self.import_id) is not None:
                return  # the queuing commit went through though its caller was cancelled
            if store.get_draft(self.spool, self.team_id, self.import_id) is not None:
                return
            batch = WriteBatch()
            store.discard_upload(batch, self.import_id, self.chunks + 1)
            await self.spool.commit(batch)

    def detected_format(self) -> DetectedFormat:
        """The file's separator and encoding, told from its first MiB."""
        return detect_format(bytes(self.head), at_eof=self.size == len(self.head))

    def header(self, fmt: CsvFormat = DEFAULT_FORMAT) -> CsvRecord:
        """The file's header (row 1), or the 422 that says why it cannot be used."""
        if self.size == 0:
            raise validation_error("The CSV file is empty.")
        return file_header(bytes(self.head), at_eof=self.size == len(self.head), fmt=fmt)

    def sample_rows(self, count: int, fmt: CsvFormat = DEFAULT_FORMAT) -> list[list[str]]:
        """The cells of the first `count` rows after the header that the file's first MiB
        holds (blank rows left out), to show beside the column map."""
        return sample_rows(bytes(self.head), count, at_eof=self.size == len(self.head), fmt=fmt)


def file_header(head: bytes, *, at_eof: bool, fmt: CsvFormat) -> CsvRecord:
    """The header of a file whose first bytes are `head`, or the 422 that says why it cannot
    be used."""
    header = read_header(head, at_eof=at_eof, fmt=fmt)
    if header is None:
        raise validation_error("The CSV header (its first row) must end within its first MiB.")
    if header.problem is not None:
        raise validation_error(f"The CSV header cannot be read: {header.problem}.")
    return header


def sample_rows(head: bytes, count: int, *, at_eof: bool, fmt: CsvFormat) -> list[list[str]]:
    """The cells of the first `count` rows after the header in `head` (blank rows left out)."""
    header = file_header(head, at_eof=at_eof, fmt=fmt)
    records = read_records(head[header.end :], header.end, 2, at_eof=at_eof, fmt=fmt)
    return [record.cells for record in records if record.cells][:count]


def import_job(
    spool: Spool,
    team_id: str,
    import_id: str,
    header: CsvRecord,
    file_size: int,
    *,
    targets: Mapping[str, tuple[str, str | None]],
    on_conflict: str | None,
    segments: Any,
    topics: Any,
    now: datetime,
    by_name: bool = True,
    fmt: CsvFormat = DEFAULT_FORMAT,
) -> store.ImportRecord:
    """The queued job of a file whose `header` is known: `targets` (as `parse_column_map`
    gives them) checked against the header and the team's contact properties, `segments` and
    `topics` (as a create body gives them) against the team's. Without `by_name`, columns
    `targets` leaves out are ignored even when named like a field."""
    on_conflict = on_conflict or DEFAULT_ON_CONFLICT
    if on_conflict not in ON_CONFLICT:
        raise validation_error("The `on_conflict` field must be `upsert` or `skip`.")
    kinds = {key: prop.type for key, prop in team_properties(spool, team_id).items()}
    columns = resolve_columns(header.cells, targets, kinds, by_name=by_name)
    wanted_segments = list(dict.fromkeys(segment_ids(segments)))
    for segment_id in wanted_segments:
        if get_segment(spool, team_id, segment_id) is None:
            raise ApiError(404, "not_found", f"Segment {segment_id} not found")
    wanted_topics = topic_choices(topics)
    for topic_id in wanted_topics:
        if get_topic(spool, team_id, topic_id) is None:
            raise ApiError(404, "not_found", f"Topic {topic_id} not found")
    return store.ImportRecord(
        id=import_id,
        team_id=team_id,
        status="queued",
        created_at=contract_timestamp(now),
        on_conflict=on_conflict,
        columns=column_indexes(header.cells, columns),
        segment_ids=wanted_segments,
        topics=wanted_topics,
        file_size=file_size,
        offset=header.end,
        row=2,
        separator=fmt.separator,
        encoding=fmt.encoding,
    )
