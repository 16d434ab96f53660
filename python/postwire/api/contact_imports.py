"""`/contacts/imports`: CSV imports of contacts, run as durable background jobs.

`POST` takes `multipart/form-data` as the SDKs send it: the CSV in `file`, and the JSON fields
`column_map`, `segments` and `topics`, and `on_conflict`, before or after the file (Python's
SDK sends them first, Go's after). The file's separator and encoding are detected
(`audiences.csv_format`); the optional fields `separator` and `encoding` choose them.
The file streams into the spool as it arrives, one commit per 1 MiB chunk, so the request
holds a chunk in memory and not the file, and a file larger than `MAX_FILE_BYTES` is refused
(413) as soon as it passes that. The answer comes once the
whole file, the job and its queue entry are on disk; a refused or broken upload removes what
it stored. `audiences.imports` runs the job.
"""

from __future__ import annotations

import json
from typing import Any

from quart import Blueprint, request
from quart_trio.wrappers.request import TrioRequest
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from postwire import _core
from postwire._core import WriteBatch
from postwire.api.audience_models import (
    ContactImportCreated,
    ContactImportObject,
    ContactImportSummary,
)
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import ListBody
from postwire.api.pagination import list_response, parse_page_request
from postwire.audiences.csv_format import DEFAULT_FORMAT, parse_format
from postwire.audiences.csv_rows import parse_column_map
from postwire.audiences.import_uploads import (
    MAX_FILE_BYTES,
    TOO_LARGE,
    ImportUpload,
    import_job,
)
from postwire.errors import ApiError, validation_error
from postwire.store import contact_imports as store

UPLOAD_PATH = "/contacts/imports"
# The other fields are small JSON; a form has a handful of parts.
MAX_FIELD_BYTES = 64 * 1024
MAX_PARTS = 16
# The whole request: the file, its fields and the multipart framing.
MAX_REQUEST_BYTES = MAX_FILE_BYTES + 1024 * 1024


class UploadCappedRequest(TrioRequest):
    """A request whose whole-body cap is its route's: a CSV import may be larger than any JSON
    body the app's `MAX_CONTENT_LENGTH` allows. A `Content-Length` over the cap is refused
    before a byte is read; the upload's own count refuses a longer body sent in chunks."""

    def __init__(
        self,
        method: str,
        scheme: str,
        path: str,
        *args: Any,
        max_content_length: int | None = None,
        **kwargs: Any,
    ) -> None:
        if method == "POST" and path == UPLOAD_PATH:
            max_content_length = MAX_REQUEST_BYTES
        super().__init__(
            method, scheme, path, *args, max_content_length=max_content_length, **kwargs
        )


async def _receive_form(upload: ImportUpload) -> tuple[bool, dict[str, str]]:
    """Stream the multipart body: the `file` part into `upload`, the other fields into the
    returned map. Also whether a `file` part came."""
    mimetype, options = parse_options_header(request.headers.get("Content-Type"))
    boundary = options.get("boundary")
    if mimetype != "multipart/form-data" or not boundary:
        raise validation_error(
            "Send the import as multipart/form-data, with the CSV in a field named `file`."
        )
    decoder = MultipartDecoder(boundary.encode(), max_parts=MAX_PARTS)
    fields: dict[str, str] = {}
    part: str | None = None  # the field being read; "file" for the file
    value = bytearray()
    got_file = False
    received = 0

    async def take_events() -> None:
        nonlocal part, got_file
        while True:
            event = decoder.next_event()
            if isinstance(event, NeedData | Epilogue):
                return
            if isinstance(event, File) and event.name == "file":
                if got_file:
                    raise validation_error("Send one `file`.")
                part, got_file = "file", True
            elif isinstance(event, Field | File):
                part = event.name
                value.clear()
            elif isinstance(event, Data) and part == "file":
                await upload.write(event.data)
            elif isinstance(event, Data) and part is not None:
                value.extend(event.data)
                if len(value) > MAX_FIELD_BYTES:
                    raise validation_error(f"The `{part}` field must be at most 64 KiB.")
                if not event.more_data:
                    fields[part] = value.decode(errors="replace")

    try:
        async for data in request.body:
            received += len(data)
            if received > MAX_REQUEST_BYTES:
                raise TOO_LARGE
            decoder.receive_data(data)
            await take_events()
        decoder.receive_data(None)
        await take_events()
    except RequestEntityTooLarge:  # the body's own cap, or too many parts
        raise TOO_LARGE from None
    except ValueError:  # werkzeug's word for a body that is not multipart
        raise validation_error("The multipart/form-data body is malformed.") from None
    return got_file, fields


def _json_field(fields: dict[str, str], name: str) -> Any:
    raw = fields.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise validation_error(f"The `{name}` field must be JSON.") from None


def import_summary(record: store.ImportRecord) -> ContactImportSummary:
    body: ContactImportSummary = {
        "object": "contact_import",
        "id": record.id,
        "status": record.status,
        "created_at": record.created_at,
        "completed_at": record.completed_at,
        "counts": {
            "total": record.total,
            "created": record.created,
            "updated": record.updated,
            "skipped": record.skipped,
            "failed": record.failed,
        },
    }
    if record.failure is not None:
        body["failure_reason"] = record.failure
    return body


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("contact_imports", __name__)

    @blueprint.post(UPLOAD_PATH)
    async def create_import() -> tuple[ContactImportCreated, int]:
        team = current_caller().team_id
        upload = ImportUpload(ctx.spool, team, _core.new_id(), ctx.now_ms)
        try:
            got_file, fields = await _receive_form(upload)
            record = _new_import(ctx, upload, got_file, fields)
            batch = WriteBatch()
            upload.finish(batch)
            store.queue_import(batch, record)
            await ctx.spool.commit(batch)
        except BaseException:
            await upload.discard()
            raise
        return {"object": "contact_import", "id": record.id}, 201

    @blueprint.get(UPLOAD_PATH)
    async def list_imports() -> ListBody:
        page = parse_page_request(request.args, default_limit=20)
        status = request.args.get("status") or None
        if status is not None and status not in store.STATUSES:
            raise validation_error(
                "The `status` must be `queued`, `in_progress`, `completed` or `failed`."
            )
        records, has_more = store.list_imports(
            ctx.spool,
            current_caller().team_id,
            limit=page.limit or 20,
            after=page.after,
            before=page.before,
            status=status,
        )
        return list_response([dict(import_summary(record)) for record in records], has_more)

    @blueprint.get(f"{UPLOAD_PATH}/<id:import_id>")
    async def get_import(import_id: str) -> ContactImportObject:
        record = store.get_import(ctx.spool, current_caller().team_id, import_id)
        if record is None:
            raise ApiError(404, "not_found", "Contact import not found")
        bad = store.bad_rows(ctx.spool, record.id)
        return {
            **import_summary(record),
            "failed_rows": [{"row": b.row, "email": b.email, "reason": b.reason} for b in bad],
        }

    return blueprint


def _new_import(
    ctx: ApiContext, upload: ImportUpload, got_file: bool, fields: dict[str, str]
) -> store.ImportRecord:
    """The queued job the form describes, every field checked against the team's segments,
    topics and contact properties and the file's header."""
    if not got_file:
        raise ApiError(422, "missing_required_field", "Missing `file` field.")
    fmt = upload.detected_format().format if upload.size else DEFAULT_FORMAT
    if "separator" in fields or "encoding" in fields:
        chosen = parse_format(
            fields.get("separator", fmt.separator), fields.get("encoding", fmt.encoding)
        )
        if chosen is None:
            raise validation_error(
                "The `separator` must be `,`, `;` or `tab`, and the `encoding` `utf-8` or "
                "`windows-1252`."
            )
        fmt = chosen
    header = upload.header(fmt)
    column_map = _json_field(fields, "column_map")
    return import_job(
        ctx.spool,
        upload.team_id,
        upload.import_id,
        header,
        upload.size,
        targets={} if column_map is None else parse_column_map(column_map),
        on_conflict=fields.get("on_conflict"),
        segments=_json_field(fields, "segments"),
        topics=_json_field(fields, "topics"),
        now=ctx.now(),
        fmt=fmt,
    )
