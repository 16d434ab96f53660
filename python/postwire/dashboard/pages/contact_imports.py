"""CSV imports of contacts through the dashboard: upload, map the columns, watch it run.

    GET  /contacts/import                          the upload form and the team's imports
    POST /contacts/import                          keep the file as a draft, go to its mapping
    GET  /contacts/imports/<import_id>             a draft's mapping step, or a job's progress
                                                   and refused rows
    POST /contacts/imports/<import_id>             start a draft with the mapping chosen
                                                   (creating the new properties it names)
    POST /contacts/imports/<import_id>/format      read a draft again with another separator
                                                   or encoding
    POST /contacts/imports/<import_id>/discard     drop a draft and its file
    GET  /contacts/imports/<import_id>/progress    the job's counts as JSON, for the page's script
    GET  /contacts/imports/<import_id>/errors.csv  the refused rows kept, as a CSV download

The file goes into the spool as the API's uploads do (`audiences.import_uploads`), up to the
API's 50 MB, and the job is the API's, run by `audiences.imports`. Its separator and encoding
are detected at upload (`audiences.csv_format`) and shown for a person to change. A column
can become a new contact property, created by the properties API's own `create_property`.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from typing import Any, Final

from quart import Blueprint, Response, g, redirect, render_template, request
from quart_trio.wrappers.request import TrioRequest
from werkzeug.exceptions import NotFound

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.csv_format import ENCODINGS, SEPARATORS, CsvFormat, parse_format
from postwire.audiences.csv_rows import (
    CONTACT_FIELDS,
    MAX_RECORD_BYTES,
    PROPERTY_PREFIX,
    CsvRecord,
    target_named_like,
)
from postwire.audiences.import_uploads import (
    MAX_FILE_BYTES,
    ImportUpload,
    file_header,
    import_job,
    sample_rows,
)
from postwire.audiences.properties import create_property
from postwire.audiences.records import is_record_id
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.contacts import team_segments, team_topics
from postwire.dashboard.pages.refusals import Redirect, done, refused
from postwire.errors import ApiError, validation_error
from postwire.store import contact_imports as store
from postwire.store.accounts import contract_timestamp
from postwire.store.contact_properties import team_properties

UPLOAD_PATH: Final = "/contacts/import"
# The upload form's whole body: the file, the CSRF token and the multipart framing.
MAX_UPLOAD_REQUEST_BYTES: Final = MAX_FILE_BYTES + 1024 * 1024
SAMPLE_ROWS: Final = 5
RECENT_IMPORTS: Final = 20
ERRORS_SHOWN: Final = 100
READ_CHUNK: Final = 1024 * 1024
IGNORED: Final = "ignore"
COLUMN_FIELD: Final = "column."
# A column mapped to a property made for it: `new.string` or `new.number`, its key in the
# `new_key.<column index>` field.
NEW_PROPERTY: Final = "new."
NEW_KEY_FIELD: Final = "new_key."
NEW_PROPERTY_WORDS: Final = {"string": "New text property", "number": "New number property"}
TOPIC_FIELD: Final = "topic."
FIELD_WORDS: Final = {
    "email": "Email address",
    "first_name": "First name",
    "last_name": "Last name",
    "unsubscribed": "Unsubscribed (true/false)",
}
STATUS_WORDS: Final = {
    "queued": "Queued",
    "in_progress": "Importing",
    "completed": "Completed",
    "failed": "Failed",
}
# Cells a spreadsheet would run as a formula start with one of these: the download prefixes
# them with a quote (OWASP's advice on CSV injection).
FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")


class UploadCappedRequest(TrioRequest):
    """A request whose body cap is its route's: the upload form takes a CSV file as large as
    the API does, beyond the app's `MAX_CONTENT_LENGTH` for every other form. The form is
    parsed as it streams, its file spooled to a temporary file, not held in memory."""

    def __init__(self, method: str, scheme: str, path: str, *args: Any, **kwargs: Any) -> None:
        if method == "POST" and path == UPLOAD_PATH:
            kwargs["max_content_length"] = MAX_UPLOAD_REQUEST_BYTES
        super().__init__(method, scheme, path, *args, **kwargs)


def progress_json(record: store.ImportRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "status": record.status,
        "status_words": STATUS_WORDS[record.status],
        "done": record.status in ("completed", "failed"),
        "counts": {
            "total": record.total,
            "created": record.created,
            "updated": record.updated,
            "skipped": record.skipped,
            "failed": record.failed,
        },
        "failure": record.failure,
        "completed_at": record.completed_at,
    }


def suggested_key(column: str, index: int) -> str:
    """A contact property key made from a column's name (`Plan type` -> `plan_type`)."""
    key = re.sub(r"[^A-Za-z0-9_]+", "_", column.strip().lower()).strip("_")[:50]
    return key or f"column_{index + 1}"


def spreadsheet_safe(cell: str) -> str:
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def errors_csv(record: store.ImportRecord, bad: list[store.BadRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["row", "email", "reason"])
    for row in bad:
        writer.writerow([row.row, spreadsheet_safe(row.email or ""), spreadsheet_safe(row.reason)])
    if record.failed > len(bad):
        more = record.failed - len(bad)
        rows = "1 more row was" if more == 1 else f"{more} more rows were"
        writer.writerow(["", "", f"{rows} refused; only the first {len(bad)} are kept"])
    return out.getvalue()


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("contact_imports", __name__)
    spool = ctx.spool

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    def now_ms() -> int:
        return int(ctx.now_seconds() * 1000)

    def team_job(import_id: str) -> store.ImportRecord:
        record = store.get_import(spool, team_id(), import_id) if is_record_id(import_id) else None
        if record is None:
            raise NotFound
        return record

    def team_draft(import_id: str) -> store.ImportDraft | None:
        return store.get_draft(spool, team_id(), import_id) if is_record_id(import_id) else None

    @bp.get(UPLOAD_PATH)
    async def upload_page() -> str:
        jobs, _ = store.list_imports(
            spool, team_id(), limit=RECENT_IMPORTS, after=None, before=None, status=None
        )
        return await render_template(
            "contact_import.html",
            jobs=jobs,
            drafts=store.team_drafts(spool, team_id(), RECENT_IMPORTS),
            words=STATUS_WORDS,
        )

    @bp.post(UPLOAD_PATH)
    async def upload() -> Redirect:
        file = (await request.files).get("file")
        if file is None or not file.filename:
            return await refused(
                validation_error("Choose a CSV file to import."), "/contacts/import"
            )
        upload = ImportUpload(spool, team_id(), _core.new_id(), now_ms)
        try:
            while chunk := file.stream.read(READ_CHUNK):
                await upload.write(chunk)
            detected = upload.detected_format()
            header = upload.header(detected.format)
            draft = store.ImportDraft(
                id=upload.import_id,
                team_id=upload.team_id,
                created_at=contract_timestamp(ctx.now()),
                created_at_ms=now_ms(),
                file_name=file.filename[:200],
                file_size=upload.size,
                header=header.cells,
                header_end=header.end,
                sample=upload.sample_rows(SAMPLE_ROWS, detected.format),
                separator=detected.format.separator,
                encoding=detected.format.encoding,
                format_sure=detected.sure,
            )
            batch = WriteBatch()
            upload.finish(batch)
            store.put_draft(batch, draft)
            await spool.commit(batch)
        except ApiError as error:
            await upload.discard()
            return await refused(error, "/contacts/import")
        except BaseException:
            await upload.discard()
            raise
        return redirect(f"/contacts/imports/{draft.id}", 303)

    @bp.get("/contacts/imports/<import_id>")
    async def import_page(import_id: str) -> str:
        draft = team_draft(import_id)
        if draft is not None:
            return await mapping_page(draft)
        record = team_job(import_id)
        bad = store.bad_rows(spool, record.id)
        return await render_template(
            "contact_import_detail.html",
            record=record,
            progress=progress_json(record),
            bad=bad[:ERRORS_SHOWN],
            kept=len(bad),
            segments=await team_segments(spool, record.team_id),
            topics=await team_topics(spool, record.team_id),
        )

    async def mapping_page(draft: store.ImportDraft) -> str:
        properties = team_properties(spool, draft.team_id)
        kinds = {key: prop.type for key, prop in properties.items()}
        guesses = [target_named_like(column, kinds) or IGNORED for column in draft.header]
        targets = [(field, words) for field, words in FIELD_WORDS.items()]
        targets += [(PROPERTY_PREFIX + key, f"Property {key} ({prop.type})")
                    for key, prop in properties.items()]  # fmt: skip
        targets += [(NEW_PROPERTY + kind, words) for kind, words in NEW_PROPERTY_WORDS.items()]
        return await render_template(
            "contact_import_map.html",
            draft=draft,
            guesses=guesses,
            targets=targets,
            new_keys=[suggested_key(column, i) for i, column in enumerate(draft.header)],
            new_key_field=NEW_KEY_FIELD,
            separators=SEPARATORS,
            encodings=ENCODINGS,
            segments=await team_segments(spool, draft.team_id),
            topics=await team_topics(spool, draft.team_id),
            column_field=COLUMN_FIELD,
            topic_field=TOPIC_FIELD,
            ignored=IGNORED,
        )

    async def started(import_id: str) -> Redirect:
        """What a form of a draft that is a job by now leads to."""
        team_job(import_id)  # another team's id, or none: a 404
        return await done("This import has already started.", f"/contacts/imports/{import_id}")

    @bp.post("/contacts/imports/<import_id>")
    async def start(import_id: str) -> Redirect:
        draft = team_draft(import_id)
        if draft is None:
            return await started(import_id)
        back = f"/contacts/imports/{draft.id}"
        form = await request.form
        targets: dict[str, tuple[str, str | None]] = {}
        new_properties: dict[str, str] = {}  # key -> type, made before the job is queued
        for index, column in enumerate(draft.header):
            target = form.get(f"{COLUMN_FIELD}{index}", IGNORED)
            if target == IGNORED:
                continue
            if (
                target.startswith(NEW_PROPERTY)
                and target[len(NEW_PROPERTY) :] in NEW_PROPERTY_WORDS
            ):
                key = form.get(f"{NEW_KEY_FIELD}{index}", "").strip()
                key = key or suggested_key(column, index)
                new_properties[key] = target.removeprefix(NEW_PROPERTY)
                target = PROPERTY_PREFIX + key
            elif target not in CONTACT_FIELDS and not target.startswith(PROPERTY_PREFIX):
                return await refused(
                    validation_error(f"Column {column!r}: choose what it holds."), back
                )
            if target in targets:
                message = f"Two columns are mapped to {target.removeprefix(PROPERTY_PREFIX)}."
                return await refused(validation_error(message), back)
            targets[target] = (column, None)
        if "email" not in targets:  # the API's own refusal speaks of `column_map`
            message = "Choose the column that holds the email addresses (set it to Email)."
            return await refused(validation_error(message), back)
        topics = [
            {"id": topic_id, "subscription": form[TOPIC_FIELD + topic_id]}
            for topic_id in await team_topics(spool, draft.team_id)
            if form.get(TOPIC_FIELD + topic_id) in ("opt_in", "opt_out")
        ]
        header = CsvRecord(1, draft.header_end, draft.header)
        async for attempt in spool.guarded(store.draft_key(draft.team_id, draft.id)):
            with attempt:
                if team_draft(draft.id) is None:
                    return await done("This import has already started.", back)
                try:
                    await create_properties(draft.team_id, new_properties)
                    record = import_job(
                        spool, draft.team_id, draft.id, header, draft.file_size,
                        targets=targets, on_conflict=form.get("on_conflict") or None,
                        segments=form.getlist("segments"), topics=topics, now=ctx.now(),
                        by_name=False, fmt=CsvFormat(draft.separator, draft.encoding),
                    )  # fmt: skip
                except ApiError as error:
                    return await refused(error, back)
                batch = WriteBatch()
                store.start_draft(batch, draft, record)
                await spool.commit(batch)
        return await done("The import has started.", back)

    async def create_properties(team: str, wanted: dict[str, str]) -> None:
        """Create the properties of `wanted` (key -> type) as the properties API does; one that
        exists with that type already (made by an earlier try of this mapping) is used."""
        existing = team_properties(spool, team)
        for key, kind in wanted.items():
            if key in existing and existing[key].type == kind:
                continue
            if key in existing:
                raise validation_error(
                    f"The contact property `{key}` exists already and holds a "
                    f"{existing[key].type}: choose it in the list, or give the new property "
                    "another key."
                )
            await create_property(spool, team, {"key": key, "type": kind}, ctx.now())

    @bp.post("/contacts/imports/<import_id>/format")
    async def change_format(import_id: str) -> Redirect:
        """Read the draft's header and first rows again in the separator and encoding chosen."""
        draft = team_draft(import_id)
        if draft is None:
            return await started(import_id)
        back = f"/contacts/imports/{draft.id}"
        form = await request.form
        fmt = parse_format(form.get("separator"), form.get("encoding"))
        if fmt is None:
            return await refused(validation_error("Choose a separator and an encoding."), back)
        head = store.read_file(spool, draft.id, 0, MAX_RECORD_BYTES)
        at_eof = len(head) >= draft.file_size
        try:
            header = file_header(head, at_eof=at_eof, fmt=fmt)
            sample = sample_rows(head, SAMPLE_ROWS, at_eof=at_eof, fmt=fmt)
        except ApiError as error:
            return await refused(error, back)
        async for attempt in spool.guarded(store.draft_key(draft.team_id, draft.id)):
            with attempt:
                if team_draft(draft.id) is None:
                    return await done("This import has already started.", back)
                batch = WriteBatch()
                store.put_draft(batch, replace(
                    draft, header=header.cells, header_end=header.end, sample=sample,
                    separator=fmt.separator, encoding=fmt.encoding, format_sure=True,
                ))  # fmt: skip
                await spool.commit(batch)
        separator = SEPARATORS[fmt.separator].split(" ")[0].lower()
        message = f"The file is read again as {ENCODINGS[fmt.encoding]}, {separator}-separated."
        return await done(message, back)

    @bp.post("/contacts/imports/<import_id>/discard")
    async def discard(import_id: str) -> Redirect:
        draft = team_draft(import_id)
        if draft is None:
            raise NotFound
        batch = WriteBatch()
        chunks = store.file_chunks(draft.file_size) + 1
        store.discard_upload(batch, draft.id, chunks, team_id=draft.team_id)
        await spool.commit(batch)
        return await done(f"The upload of {draft.file_name} was dropped.", "/contacts/import")

    @bp.get("/contacts/imports/<import_id>/progress")
    async def progress(import_id: str) -> dict[str, Any]:
        return progress_json(team_job(import_id))

    @bp.get("/contacts/imports/<import_id>/errors.csv")
    async def errors_download(import_id: str) -> Response:
        record = team_job(import_id)
        body = errors_csv(record, store.bad_rows(spool, record.id))
        response = Response(body, mimetype="text/csv")
        response.headers["Content-Disposition"] = (
            f'attachment; filename="import-{record.id}-errors.csv"'
        )
        return response

    return bp
