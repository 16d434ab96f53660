"""A broadcast's block document saved by the editor: validated, rendered with the team's brand
kit, and written with the broadcast record's `html` and `text` (and the envelope fields the
editor sends: name, from, subject, preview text, reply-to) in one batch, so what the engine
sends is always the document as last saved.

Only a draft is edited: a scheduled broadcast goes back to draft first (cancel its schedule),
and one that is sending or sent keeps the content it went out with. An editor sends the
revision it last saw; a save based on an older one (another tab saved since) is refused rather
than undoing that tab's work.

A value that cannot be saved (a subject too long, a from that is not an address, a link with a
space) does not hold the others back: the save keeps that field as it was saved (a refused
block: its saved version, or none if it is new), writes everything else, and says which
fields it refused. It is still one request under the broadcast's lock and one commit with one
new revision, so the stale-editor check holds as for any save.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
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
from postwire.store.brand_kits import (
    BrandKitRecord,
    get_brand_kit,
    get_brand_kit_parked,
    put_brand_kit,
)
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
# Refused blocks a save puts back to their saved version before it keeps the whole saved
# document instead (each is one more parse of the document).
MAX_REFUSED_BLOCKS: Final = 20


@dataclass(frozen=True, slots=True)
class Refusal:
    """A value a save kept as it was: `field` is the editor's (`subject`, `from`, ...,
    `document`); in a document, `block_id` and `block_field` say where (None: the document, or
    the block, as a whole)."""

    field: str
    message: str
    block_id: str | None = None
    block_field: str | None = None


@dataclass(frozen=True, slots=True)
class SavedDocument:
    revision: int
    updated_at: str
    refused: list[Refusal] = field(default_factory=list)


def html_digest(html: str | None) -> str:
    return hashlib.sha256((html or "").encode()).hexdigest()


def replaced_since_saved(record: BroadcastRecord, saved: DocumentRecord) -> bool:
    """Whether the broadcast's HTML was replaced (through the API) after the document was
    last saved: the editor then shows that HTML instead of silently overwriting it."""
    return bool(saved.html_digest) and html_digest(record.html) != saved.html_digest


def team_brand(spool: Spool, team_id: str) -> BrandKit:
    """The team's saved brand kit, or the default one."""
    return _kit_of(get_brand_kit(spool, team_id))


async def team_brand_parked(spool: Spool, team_id: str) -> BrandKit:
    """`team_brand`, parked rather than blocking on a table store on the network."""
    return _kit_of(await get_brand_kit_parked(spool, team_id))


def _kit_of(record: BrandKitRecord | None) -> BrandKit:
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


def envelope_fields(body: Mapping[str, Any]) -> tuple[dict[str, Any], list[Refusal]]:
    """The broadcast record fields a save sets (only those the body names, each validated on
    its own), and the fields refused with why."""
    fields: dict[str, Any] = {}
    refused: list[Refusal] = []
    checks: dict[str, tuple[str, Callable[[object], Any]]] = {
        "name": ("name", lambda value: _bounded_line(value, "name", "The name", MAX_NAME_LENGTH)),
        "subject": (
            "subject",
            lambda value: _bounded_line(value, "subject", "The subject", MAX_SUBJECT_LENGTH),
        ),
        "preview_text": (
            "preview_text",
            lambda value: (
                _bounded_line(value, "preview_text", "The preview text", MAX_PREVIEW_LENGTH) or None
            ),
        ),
        "from": ("sender", _sender),
        "reply_to": ("reply_to", _reply_to),
    }
    for key, (name, check) in checks.items():
        if key not in body:
            continue
        try:
            value = check(body[key])
        except ApiError as error:
            refused.append(Refusal(key, error.message.replace("`", "")))
            continue
        if value is not _KEEP:
            fields[name] = value
    return fields, refused


async def save_document(
    spool: Spool, team_id: str, broadcast_id: str, body: Mapping[str, Any], *, now: datetime
) -> SavedDocument:
    """Save the body's `document` and envelope fields to the team's draft broadcast, but for
    the values refused (`SavedDocument.refused`), which keep their saved version.

    Raises `ApiError`: 404 no such broadcast in the team, 409 not a draft or a stale
    revision, 422 no `document` or a `revision` that is not a number.
    """
    if "document" not in body:
        raise ApiError(422, "missing_required_field", "Missing `document` field")
    revision = body.get("revision")
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
        raise validation_error("The `revision` field must be an integer.")
    fields, refused = envelope_fields(body)
    brand = team_brand(spool, team_id)
    async for attempt in spool.guarded(broadcast_key(team_id, broadcast_id)):
        with attempt:
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
            saved_document = None if current is None else current.document
            rendered_document = _savable_document(body["document"], saved_document, brand, refused)
            if rendered_document is None and not fields:
                # Nothing the body sent can be saved: no commit, the revision stays.
                updated_at = "" if current is None else current.updated_at
                return SavedDocument(saved_revision, updated_at, refused)
            batch = WriteBatch()
            if rendered_document is None:
                changed = replace(record, **fields)  # the saved document and its HTML stay
                document, digest = saved_document, "" if current is None else current.html_digest
            else:
                document, rendered = rendered_document
                changed = replace(record, html=rendered.html, text=rendered.text, **fields)
                digest = html_digest(rendered.html)
            if document is not None:
                saved = DocumentRecord(
                    team_id, broadcast_id, document, saved_revision + 1, contract_timestamp(now),
                    digest,
                )  # fmt: skip
                put_document(batch, saved)
            put_broadcast(batch, changed)
            await spool.commit(batch)
    if document is None:  # envelope fields of a broadcast that has no document yet
        return SavedDocument(saved_revision, contract_timestamp(now), refused)
    return SavedDocument(saved.revision, saved.updated_at, refused)


def _savable_document(
    raw: object, saved: dict[str, Any] | None, brand: BrandKit, refused: list[Refusal]
) -> tuple[dict[str, Any], RenderedEmail] | None:
    """`raw` checked and rendered, each block it refuses put back to its `saved` version (or
    left out when it is new), the refusals added to `refused`; None when the document as a
    whole is refused (its style, its footer, its shape), which keeps the saved one."""
    candidate = raw
    for _ in range(MAX_REFUSED_BLOCKS):
        try:
            document = parse_document(candidate)
        except DocumentError as error:
            # A block refused again is its saved version (saved under older rules): it is
            # left out instead, and its first refusal says why.
            again = error.block_id is not None and any(
                r.block_id == error.block_id for r in refused
            )
            if not again:
                message = str(error).replace("`", "")
                refused.append(Refusal("document", message, error.block_id, error.field))
            if error.block_id is None or not isinstance(candidate, dict):
                return None
            previous = _find_block(saved["blocks"], error.block_id) if saved and not again else None
            candidate = {
                **candidate,
                "blocks": _with_block(candidate.get("blocks"), error.block_id, previous),
            }
            continue
        assert isinstance(candidate, dict)  # parse_document refuses anything else
        return candidate, render_document(document, brand)
    return None


def _find_block(blocks: object, block_id: str) -> dict[str, Any] | None:
    """The block of `block_id` in a list of blocks, columns' blocks included."""
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("id") == block_id:
            return block
        for column in block.get("columns") or ():
            found = _find_block(column, block_id)
            if found is not None:
                return found
    return None


def _with_block(blocks: object, block_id: str, replacement: dict[str, Any] | None) -> object:
    """`blocks` with the block of `block_id` (in a column too) replaced, or left out when
    `replacement` is None; the lists are copied, the other blocks shared."""
    if not isinstance(blocks, list):
        return blocks
    result: list[object] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("id") == block_id:
            if replacement is not None:
                result.append(replacement)
        elif isinstance(block, dict) and isinstance(block.get("columns"), list):
            columns = [_with_block(column, block_id, replacement) for column in block["columns"]]
            result.append({**block, "columns": columns})
        else:
            result.append(block)
    return result


async def start_blank_document(
    spool: Spool, team_id: str, broadcast_id: str, *, now: datetime
) -> SavedDocument:
    """Give a draft without a document (its HTML came through the API) a new blank one, which
    replaces that HTML: the editor then edits the broadcast like any other."""
    document = empty_document()
    _, rendered = render_raw(document, team_brand(spool, team_id))
    async for attempt in spool.guarded(broadcast_key(team_id, broadcast_id)):
        with attempt:
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


def _bounded_line(value: object, field: str, what: str, limit: int) -> str:
    line = _line(value, field)
    if len(line) > limit:
        raise validation_error(f"{what} must be at most {limit:,} characters, not {len(line):,}.")
    return line


# A field whose value keeps what was saved.
_KEEP: Final = object()


def _sender(value: object) -> object:
    sender = _line(value, "from").strip()
    if not sender:  # an empty one keeps the saved sender: a draft always has one
        return _KEEP
    _check_address(sender, "The from address")
    return sender


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
