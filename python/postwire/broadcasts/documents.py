"""A broadcast's block document saved by the editor: validated, rendered with the team's brand
kit, and written with the broadcast record's `html` and `text` (and the envelope fields the
editor sends: name, from, subject, preview text, reply-to) in one batch, so what the engine
sends is always the document as last saved.

Only a draft is edited: a scheduled broadcast goes back to draft first (cancel its schedule),
and one that is sending or sent keeps the content it went out with. An editor sends the
revision it last saw; a save based on an older one (another tab saved since) is refused rather
than undoing that tab's work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from postwire._core import WriteBatch
from postwire.broadcasts.blocks.brand import BrandKit, StyleError
from postwire.broadcasts.blocks.document import DocumentError, empty_document, parse_document
from postwire.broadcasts.blocks.render import RenderedEmail, render_document
from postwire.broadcasts.messages import parse_sender
from postwire.compose.header_text import is_header_safe, is_unicode_text
from postwire.errors import ApiError, validation_error
from postwire.store.accounts import contract_timestamp
from postwire.store.brand_kits import BrandKitRecord, get_brand_kit, put_brand_kit
from postwire.store.broadcast_documents import DocumentRecord, get_document, put_document
from postwire.store.broadcasts import BroadcastRecord, broadcast_key, get_broadcast, put_broadcast
from postwire.store.spool import Spool

MAX_NAME_LENGTH: Final = 256
MAX_SUBJECT_LENGTH: Final = 998  # one header line (RFC 5322)
MAX_PREVIEW_LENGTH: Final = 500
MAX_REPLY_TO: Final = 50
# The JSON body of one save: far more than a document of a few hundred blocks needs.
MAX_SAVE_BYTES: Final = 2 * 1024 * 1024
# Editor field -> BroadcastRecord field.
_TEXT_FIELDS: Final = {"name": "name", "subject": "subject", "preview_text": "preview_text"}


@dataclass(frozen=True, slots=True)
class SavedDocument:
    revision: int
    updated_at: str


def html_digest(html: str | None) -> str:
    return hashlib.sha256((html or "").encode()).hexdigest()


def replaced_since_saved(record: BroadcastRecord, saved: DocumentRecord) -> bool:
    """Whether the broadcast's HTML was replaced (through the API) after the document was
    last saved: the editor then shows that HTML instead of silently overwriting it."""
    return bool(saved.html_digest) and html_digest(record.html) != saved.html_digest


def team_brand(spool: Spool, team_id: str) -> BrandKit:
    """The team's saved brand kit, or the default one."""
    record = get_brand_kit(spool, team_id)
    if record is None:
        return BrandKit.default()
    try:
        return BrandKit.from_json(record.kit)
    except StyleError:  # saved by an older version with other rules: start again from defaults
        return BrandKit.default()


def editable_refusal(record: BroadcastRecord) -> str | None:
    """Why the editor may not change this broadcast, in words; None: it may."""
    if record.status == "draft":
        return None
    if record.status == "scheduled":
        return (
            "This broadcast is scheduled, so its content is locked. Cancel the schedule on the "
            "broadcast's page to edit it again."
        )
    return f"This broadcast is {record.status}: what was sent can no longer be edited."


def render_raw(raw: object, brand: BrandKit) -> tuple[dict[str, Any], RenderedEmail]:
    """The document checked and rendered; raises a 422 `ApiError` naming the problem."""
    try:
        document = parse_document(raw)
    except DocumentError as error:
        raise validation_error(str(error)) from None
    assert isinstance(raw, dict)  # parse_document refuses anything else
    return raw, render_document(document, brand)


def envelope_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The broadcast record fields a save sets (only those the body names), validated."""
    fields: dict[str, Any] = {}
    for key, name in _TEXT_FIELDS.items():
        if key in body:
            fields[name] = _line(body[key], key)
    if "name" in fields and len(fields["name"]) > MAX_NAME_LENGTH:
        raise validation_error(f"The name must be at most {MAX_NAME_LENGTH} characters.")
    if "subject" in fields and len(fields["subject"]) > MAX_SUBJECT_LENGTH:
        raise validation_error(f"The subject must be at most {MAX_SUBJECT_LENGTH} characters.")
    if "preview_text" in fields:
        preview = fields["preview_text"]
        if len(preview) > MAX_PREVIEW_LENGTH:
            raise validation_error(
                f"The preview text must be at most {MAX_PREVIEW_LENGTH} characters."
            )
        fields["preview_text"] = preview or None
    if "from" in body:
        sender = _line(body["from"], "from").strip()
        if sender:  # an empty one keeps the saved sender: a draft always has one
            _check_address(sender, "The from address")
            fields["sender"] = sender
    if "reply_to" in body:
        fields["reply_to"] = _reply_to(body["reply_to"])
    return fields


async def save_document(
    spool: Spool, team_id: str, broadcast_id: str, body: Mapping[str, Any], *, now: datetime
) -> SavedDocument:
    """Save the body's `document` (and envelope fields) to the team's draft broadcast.

    Raises `ApiError`: 404 no such broadcast in the team, 409 not a draft or a stale
    revision, 422 a document or field refused (the message says which and why).
    """
    if "document" not in body:
        raise ApiError(422, "missing_required_field", "Missing `document` field")
    revision = body.get("revision")
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
        raise validation_error("The `revision` field must be an integer.")
    fields = envelope_fields(body)
    raw, rendered = render_raw(body["document"], team_brand(spool, team_id))
    async with spool.record_lock(broadcast_key(team_id, broadcast_id)):
        record = _draft(spool, team_id, broadcast_id)
        current = get_document(spool, team_id, broadcast_id)
        saved_revision = 0 if current is None else current.revision
        if revision is not None and revision != saved_revision:
            raise ApiError(
                409,
                "conflict",
                "This broadcast was saved from another window since you opened it. Reload the "
                "page to edit the latest version.",
            )
        saved = DocumentRecord(
            team_id, broadcast_id, raw, saved_revision + 1, contract_timestamp(now),
            html_digest(rendered.html),
        )  # fmt: skip
        batch = WriteBatch()
        put_document(batch, saved)
        put_broadcast(batch, replace(record, html=rendered.html, text=rendered.text, **fields))
        await spool.commit(batch)
    return SavedDocument(saved.revision, saved.updated_at)


async def start_blank_document(
    spool: Spool, team_id: str, broadcast_id: str, *, now: datetime
) -> SavedDocument:
    """Give a draft without a document (its HTML came through the API) a new blank one, which
    replaces that HTML: the editor then edits the broadcast like any other."""
    document = empty_document()
    _, rendered = render_raw(document, team_brand(spool, team_id))
    async with spool.record_lock(broadcast_key(team_id, broadcast_id)):
        record = _draft(spool, team_id, broadcast_id)
        current = get_document(spool, team_id, broadcast_id)
        revision = 1 if current is None else current.revision + 1
        saved = DocumentRecord(
            team_id, broadcast_id, document, revision, contract_timestamp(now),
            html_digest(rendered.html),
        )  # fmt: skip
        batch = WriteBatch()
        put_document(batch, saved)
        put_broadcast(batch, replace(record, html=rendered.html, text=rendered.text))
        await spool.commit(batch)
    return SavedDocument(saved.revision, saved.updated_at)


async def restore_document(
    spool: Spool, team_id: str, broadcast_id: str, *, now: datetime
) -> SavedDocument:
    """Render the saved document again over HTML the API put in its place since."""
    saved = get_document(spool, team_id, broadcast_id)
    if saved is None:
        raise ApiError(404, "not_found", "This broadcast has no document to go back to.")
    body = {"document": saved.document, "revision": saved.revision}
    return await save_document(spool, team_id, broadcast_id, body, now=now)


async def save_brand_kit(spool: Spool, team_id: str, raw: object, *, now: datetime) -> BrandKit:
    """Check and store the team's brand kit; raises a 422 `ApiError` naming a wrong value."""
    try:
        kit = BrandKit.from_json(raw)
    except StyleError as error:
        raise validation_error(str(error)) from None
    batch = WriteBatch()
    put_brand_kit(batch, BrandKitRecord(team_id, kit.to_json(), contract_timestamp(now)))
    await spool.commit(batch)
    return kit


def _draft(spool: Spool, team_id: str, broadcast_id: str) -> BroadcastRecord:
    record = get_broadcast(spool, team_id, broadcast_id)
    if record is None:
        raise ApiError(404, "not_found", "Broadcast not found")
    problem = editable_refusal(record)
    if problem is not None:
        raise ApiError(409, "conflict", problem)
    return record


def _line(value: object, field: str) -> str:
    """One line of text fit for a header field (None: empty)."""
    if value is None:
        return ""
    if (
        isinstance(value, str)
        and is_header_safe(value)
        and is_unicode_text(value)
        and not any(char in value for char in "\r\n\0")
    ):
        return value
    raise validation_error(
        f"The `{field}` field must be one line of text, without control characters."
    )


def _check_address(value: str, what: str) -> None:
    try:
        parse_sender(value)
    except ApiError:
        raise validation_error(
            f"{what} {value!r} is not an address like news@example.com or News <news@example.com>."
        ) from None


def _reply_to(value: object) -> list[str]:
    """One address, several separated by commas, or a list; empty: none."""
    if value is None:
        return []
    if isinstance(value, str):
        values = [part.strip() for part in value.split(",")]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        values = [item.strip() for item in value]
    else:
        raise validation_error("The `reply_to` field must be text or a list of addresses.")
    values = [_line(item, "reply_to") for item in values if item]
    if len(values) > MAX_REPLY_TO:
        raise validation_error(f"A broadcast has at most {MAX_REPLY_TO} reply-to addresses.")
    for item in values:
        _check_address(item, "The reply-to address")
    return values
