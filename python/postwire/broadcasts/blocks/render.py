"""A broadcast document rendered to what a broadcast sends: email-safe HTML (MJML rendered by
the Rust core through `mrml`) and a text part written from the same blocks.

Both keep the `{{{...}}}` placeholders (contact fields, the unsubscribe URL) for the broadcast
engine to fill in per recipient. The same document and kit always give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from postwire import _core
from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.document import Document
from postwire.broadcasts.blocks.mjml import document_to_mjml
from postwire.broadcasts.blocks.text_part import document_to_text


@dataclass(frozen=True, slots=True)
class RenderedEmail:
    html: str
    text: str


def render_document(document: Document, brand: BrandKit) -> RenderedEmail:
    """The HTML and text of `document` styled by `brand` (the document's own style wins).
    Raises `postwire.errors.MessageError` only if the generated MJML were refused, a bug."""
    html = _core.mjml_to_html(document_to_mjml(document, brand))
    return RenderedEmail(html=html, text=document_to_text(document, brand))
