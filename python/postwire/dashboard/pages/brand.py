"""The brand kit: the team's colours, font, button shape, alignment, logo and postal address,
which every broadcast document starts from (a document's own styles override them) and the
renderer uses where a document says nothing.

    GET  /brand            the kit as a form (members: read-only)
    POST /brand            save it (form; the logo may be uploaded by the page's script)
    GET  /brand/preview    a sample email in the kit's styles, for the page's sandboxed frame

A broadcast's HTML is rendered when its document is saved: a changed kit shows in a draft the
next time the editor saves it.
"""

from __future__ import annotations

from typing import Any, Final

from quart import Blueprint, Response, g, render_template, request

from postwire.broadcasts import documents
from postwire.broadcasts.blocks.brand import ALIGNMENTS, BUTTON_SHAPES, FONT_STACKS, BrandKit
from postwire.broadcasts.blocks.document import empty_document
from postwire.broadcasts.blocks.languages import LANGUAGES
from postwire.broadcasts.images import uploaded_image_id, uploads_url
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.broadcast_editor import (
    FONT_NAMES,
    PREVIEW_UNSUBSCRIBE_URL,
    preview_policy,
)
from postwire.dashboard.pages.refusals import Redirect, done, refused
from postwire.errors import ApiError
from postwire.store.users import role_at_least
from postwire.templates.placeholders import UNSUBSCRIBE_URL_NAMES, compile_placeholders

# The kit's colours, each with what it colours, in the order the form shows them.
COLOURS: Final = (
    ("background", "Around the email"),
    ("content_background", "Email body"),
    ("text_color", "Text"),
    ("heading_color", "Headings"),
    ("link_color", "Links"),
    ("button_background", "Buttons"),
    ("button_text_color", "Button text"),
)
_TEXT_FIELDS: Final = (
    "button_shape",
    "font",
    "align",
    "language",
    "logo_url",
    "logo_alt",
    "postal_address",
)


def kit_from_form(form: Any) -> dict[str, object]:
    """The kit's JSON as the form gives it (checked by `BrandKit.from_json`)."""
    raw: dict[str, object] = {}
    for key, _ in COLOURS:
        if key in form:
            raw[key] = form[key]
    for key in _TEXT_FIELDS:
        if key in form:
            raw[key] = form[key].strip()
    width = form.get("logo_width", "").strip()
    if width:
        try:
            raw["logo_width"] = int(width)
        except ValueError:
            raw["logo_width"] = width  # refused by the kit's check, with its message
    return raw


def _sample_document() -> dict[str, Any]:
    """A new document with a button before its footer, so the kit's button shows too."""
    document = empty_document()
    blocks = document["blocks"]
    assert isinstance(blocks, list)
    button = {
        "id": "sample-button",
        "type": "button",
        "label": "A button",
        "url": "https://example.com/",
    }
    blocks.insert(len(blocks) - 1, button)
    return document


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("brand", __name__)
    frame_policy = preview_policy(ctx.config.api.public_url)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    @blueprint.get("/brand")
    async def brand_page() -> str:
        kit = await documents.team_brand_parked(ctx.spool, team_id())
        uploaded = uploaded_image_id(ctx.config.api.public_url, kit.logo_url)
        return await render_template(
            "brand.html",
            kit=kit,
            # The page's policy loads images from its own origin: an uploaded logo is shown
            # through `GET /broadcasts/images/<id>`; another address only in the sample.
            logo_thumbnail=None if uploaded is None else f"/broadcasts/images/{uploaded}",
            uploaded_images=uploads_url(ctx.config.api.public_url),
            colours=COLOURS,
            fonts=[(key, FONT_NAMES.get(key, key)) for key in FONT_STACKS],
            shapes=BUTTON_SHAPES,
            alignments=ALIGNMENTS,
            languages=LANGUAGES,
            may_edit=role_at_least(g.viewer.role, "admin"),
        )

    @blueprint.post("/brand")
    async def save_brand() -> Redirect:
        form = await request.form
        try:
            await documents.save_brand_kit(ctx.spool, team_id(), kit_from_form(form), now=ctx.now())
        except ApiError as error:
            return await refused(error, "/brand")
        return await done("Brand kit saved. New documents start from it.", "/brand")

    @blueprint.get("/brand/preview")
    async def brand_preview() -> Response:
        kit: BrandKit = await documents.team_brand_parked(ctx.spool, team_id())
        _, rendered = documents.render_raw(_sample_document(), kit)
        # Placeholders show their fallbacks; the unsubscribe link goes nowhere.
        sample = compile_placeholders(rendered.html).render(
            {name: PREVIEW_UNSUBSCRIBE_URL for name in UNSUBSCRIBE_URL_NAMES}, escape_html=True
        )
        response = Response(sample, mimetype="text/html")
        response.headers["Content-Security-Policy"] = frame_policy
        return response

    return blueprint
