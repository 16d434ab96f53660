"""The broadcast editor: the page a marketer writes a broadcast in, without HTML.

    GET  /broadcasts/<id>/edit            the editor (members: a read-only view and the preview)
    POST /broadcasts/<id>/document        autosave: JSON {document, revision, name, subject,
                                          preview_text, from, reply_to} -> {revision, saved_at,
                                          refused: [{field, error, block_id, block_field}]}
                                          (the values kept as saved) or 4xx {"error": "..."}
    POST /broadcasts/<id>/document/blank  a broadcast whose HTML came through the API gets a
                                          blank document instead (form; replaces that HTML)
    POST /broadcasts/<id>/document/restore  HTML replaced through the API since the document
                                          was saved gives way to the document again (form)
    GET  /broadcasts/<id>/preview         the rendered HTML, personalized as `?contact=` (an id
                                          or an address of the team's contacts) would get it,
                                          for the page's sandboxed frame (its own CSP)

The document is checked, rendered and written with the broadcast by `broadcasts.documents`;
the page's script (`editor*.js`) edits the JSON in the browser and posts it. Every look-up is
scoped to the viewer's team: another team's broadcast is a 404.
"""

from __future__ import annotations

import html
from dataclasses import replace
from datetime import datetime
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from quart import Blueprint, Response, g, jsonify, render_template, request
from werkzeug.exceptions import NotFound

from postwire.broadcasts import documents
from postwire.broadcasts.blocks.brand import ALIGNMENTS, BUTTON_SHAPES, FONT_STACKS, STYLE_KEYS
from postwire.broadcasts.blocks.document import (
    BLOCK_STYLE_KEYS,
    BLOCK_TYPES,
    COLUMN_BLOCK_TYPES,
    PADDING,
    SOCIAL_NETWORKS,
    default_block,
    empty_document,
)
from postwire.broadcasts.blocks.languages import LANGUAGES, RIGHT_TO_LEFT
from postwire.broadcasts.images import uploads_url
from postwire.broadcasts.messages import compile_broadcast
from postwire.concurrency import in_order
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.refusals import Redirect, done, refused
from postwire.domains.store import list_domains_parked
from postwire.errors import ApiError
from postwire.store.broadcast_documents import get_document_parked
from postwire.store.broadcasts import BroadcastRecord, get_broadcast_parked
from postwire.store.contact_properties import team_properties_parked
from postwire.store.contacts import ContactRecord, find_contact_parked, get_contact_parked
from postwire.store.segments import segment_members_parked
from postwire.store.spool import Spool
from postwire.store.users import role_at_least
from postwire.templates.placeholders import UNSUBSCRIBE_URL_NAMES, contact_values

# Contacts offered by the preview's picker: the first of the broadcast's segment.
PICKER_CONTACTS: Final = 50
# Fields every contact has, offered first by "Insert field".
CONTACT_FIELDS: Final = ("first_name", "last_name", "email")
# Hints beside the subject and preview text: what phones and desktop clients show.
SUBJECT_HINT: Final = (40, 60)
PREVIEW_HINT: Final = (40, 130)
# Stands in for a contact's unsubscribe link in a preview: a click must not unsubscribe anyone.
PREVIEW_UNSUBSCRIBE_URL: Final = "#unsubscribe"
# How the font menus name the email-safe font stacks.
FONT_NAMES: Final = {
    "arial": "Arial",
    "helvetica": "Helvetica",
    "verdana": "Verdana",
    "trebuchet": "Trebuchet MS",
    "georgia": "Georgia",
    "times": "Times New Roman",
    "courier": "Courier New",
    "system": "System UI",
}
# Addresses offered for `from`: these local parts at each verified domain.
SENDER_SUGGESTIONS: Final = ("news", "hello")


class DocumentWrite(Protocol):
    """`documents.start_blank_document` or `documents.restore_document`."""

    async def __call__(
        self, spool: Spool, team_id: str, broadcast_id: str, *, now: datetime
    ) -> documents.SavedDocument: ...


def preview_policy(public_url: str) -> str:
    """The preview frame's CSP: no script, nothing fetched but images (data, https, and the
    uploads Postwire serves from `api.public_url`), framed by the dashboard only."""
    origin = urlsplit(public_url)
    images = "data: https:"
    if origin.scheme == "http" and origin.netloc:
        images += f" http://{origin.netloc}"
    return (
        f"sandbox; default-src 'none'; img-src {images}; style-src 'unsafe-inline'; "
        "font-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
    )


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("broadcast_editor", __name__)
    spool = ctx.spool
    frame_policy = preview_policy(ctx.config.api.public_url)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    async def team_broadcast(broadcast_id: str) -> BroadcastRecord:
        record = await get_broadcast_parked(spool, team_id(), broadcast_id.lower())
        if record is None:
            raise NotFound
        return record

    def may_edit() -> bool:
        return role_at_least(g.viewer.role, "admin")

    @blueprint.get("/broadcasts/<broadcast_id>/edit")
    async def editor_page(broadcast_id: str) -> str:
        record = await team_broadcast(broadcast_id)
        saved = await get_document_parked(spool, record.team_id, record.id)
        # A draft without a document and without HTML starts from a blank one; one whose
        # HTML came through the API (or was replaced through it since the document's last
        # save) is shown as it is until someone starts a document or goes back to it.
        replaced = saved is not None and documents.replaced_since_saved(record, saved)
        from_api = (saved is None and bool(record.html)) or replaced
        document = saved.document if saved is not None else empty_document()
        refusal = documents.editable_refusal(record)
        return await render_template(
            "broadcast_editor.html",
            broadcast=record,
            from_api=from_api,
            replaced=replaced,
            refusal=refusal,
            editable=may_edit() and refusal is None and not from_api,
            may_edit=may_edit(),
            editor_data=await _editor_data(record, document, saved.revision if saved else 0),
            sender_options=await _sender_options(record.team_id),
            picker=await _picker_contacts(record),
            subject_hint=SUBJECT_HINT,
            preview_hint=PREVIEW_HINT,
        )

    async def _editor_data(record: BroadcastRecord, document: Any, revision: int) -> dict[str, Any]:
        properties = list(await team_properties_parked(spool, record.team_id))
        brand = await documents.team_brand_parked(spool, record.team_id)
        return {
            "broadcast_id": record.id,
            "document": document,
            "revision": revision,
            "defaults": {kind: default_block(kind) for kind in BLOCK_TYPES},
            "column_blocks": list(COLUMN_BLOCK_TYPES),
            "fields": [f"contact.{name}" for name in (*CONTACT_FIELDS, *properties)],
            "fonts": FONT_STACKS,
            "font_names": FONT_NAMES,
            "shapes": list(BUTTON_SHAPES),
            "alignments": list(ALIGNMENTS),
            "languages": LANGUAGES,
            "right_to_left": sorted(RIGHT_TO_LEFT),
            "block_styles": BLOCK_STYLE_KEYS,
            "document_styles": list(STYLE_KEYS),
            "default_padding": PADDING[2],
            "networks": SOCIAL_NETWORKS,
            "brand": brand.to_json(),
            # The canvas shows these (the team's uploads) through `GET /broadcasts/images/<id>`.
            "uploaded_images": uploads_url(ctx.config.api.public_url),
        }

    async def _sender_options(team: str) -> list[str]:
        domains, _ = await list_domains_parked(spool, team)
        return [
            f"{local}@{domain.name}"
            for domain in domains
            if domain.status == "verified"
            for local in SENDER_SUGGESTIONS
        ]

    async def _picker_contacts(record: BroadcastRecord) -> list[ContactRecord]:
        """The segment's first contacts, read together."""
        ids = await segment_members_parked(
            spool, record.team_id, record.segment_id, after_contact_id=None, limit=PICKER_CONTACTS
        )

        async def contact_of(contact_id: str) -> ContactRecord | None:
            return await get_contact_parked(spool, record.team_id, contact_id)

        found = await in_order(contact_of, ids, at_once=PICKER_CONTACTS)
        return [contact for contact in found if contact is not None]

    @blueprint.post("/broadcasts/<broadcast_id>/document")
    async def save(broadcast_id: str) -> tuple[Response, int]:
        record = await team_broadcast(broadcast_id)
        if (request.content_length or 0) > documents.MAX_SAVE_BYTES:
            return _error("The document is too large to save.", 413)
        body = await request.get_json(force=True, silent=True)
        if not isinstance(body, dict):
            return _error("The editor sent something that is not a JSON object.", 400)
        try:
            saved = await documents.save_document(
                spool, record.team_id, record.id, body, now=ctx.now()
            )
        except ApiError as error:
            if error.status == 404:
                raise NotFound from error
            return _error(error.message.replace("`", ""), error.status)
        refused = [
            {"field": r.field, "error": r.message, "block_id": r.block_id,
             "block_field": r.block_field}
            for r in saved.refused
        ]  # fmt: skip
        answer = {"revision": saved.revision, "saved_at": saved.updated_at, "refused": refused}
        return jsonify(answer), 200

    async def replace_html(broadcast_id: str, write: DocumentWrite, message: str) -> Redirect:
        """A form that puts a document in place of the broadcast's HTML, and back to the page."""
        record = await team_broadcast(broadcast_id)
        back = f"/broadcasts/{record.id}/edit"
        try:
            await write(spool, record.team_id, record.id, now=ctx.now())
        except ApiError as error:
            return await refused(error, back)
        return await done(message, back)

    @blueprint.post("/broadcasts/<broadcast_id>/document/blank")
    async def start_blank(broadcast_id: str) -> Redirect:
        message = "A blank document replaces the broadcast's HTML."
        return await replace_html(broadcast_id, documents.start_blank_document, message)

    @blueprint.post("/broadcasts/<broadcast_id>/document/restore")
    async def restore(broadcast_id: str) -> Redirect:
        message = "The editor's document replaces the HTML set through the API."
        return await replace_html(broadcast_id, documents.restore_document, message)

    @blueprint.get("/broadcasts/<broadcast_id>/preview")
    async def preview(broadcast_id: str) -> Response:
        record = await team_broadcast(broadcast_id)
        contact = await _preview_contact(record.team_id, request.args.get("contact", ""))
        response = Response(await _personalized_html(record, contact), mimetype="text/html")
        response.headers["Content-Security-Policy"] = frame_policy
        return response

    async def _preview_contact(team: str, wanted: str) -> ContactRecord | None:
        wanted = wanted.strip()
        if not wanted or len(wanted) > 320:
            return None
        return await find_contact_parked(
            spool, team, wanted.lower() if "@" not in wanted else wanted
        )

    async def _personalized_html(record: BroadcastRecord, contact: ContactRecord | None) -> str:
        """The HTML `contact` would get (placeholders filled as the engine fills them; with no
        contact, every placeholder shows its fallback)."""
        if not record.html:
            return f"<pre>{html.escape(record.text or '')}</pre>"
        try:
            content = compile_broadcast(record)
        except ApiError:  # a sender still being typed: it does not change the body
            content = compile_broadcast(replace(record, sender="preview@example.com", reply_to=[]))
        values = {name: PREVIEW_UNSUBSCRIBE_URL for name in UNSUBSCRIBE_URL_NAMES}
        if contact is not None:
            properties = await team_properties_parked(spool, record.team_id)
            values = contact_values(
                contact.email, contact.first_name, contact.last_name, contact.properties,
                {key: prop.fallback_value for key, prop in properties.items()},
                PREVIEW_UNSUBSCRIBE_URL,
            )  # fmt: skip
        address = contact.email if contact is not None else "preview@example.com"
        request_body = content.request_for(address, values, ())
        return request_body.html or ""

    return blueprint


def _error(message: str, status: int) -> tuple[Response, int]:
    return jsonify({"error": message}), status
