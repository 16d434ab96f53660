"""A document as MJML, built as an element tree and serialized with every text and attribute
escaped (`markup`), never by joining strings of markup.

Layout: a 600 px body on the kit's background; consecutive simple blocks share one section and
column on the content background, a `columns` block is a section of 2 or 3 columns (MJML
stacks them on phones), the footer sits below on the outer background. Every text sets its
colour and every section its background, so a mail app that darkens an email inverts both
together (docs/broadcast-editor.md "Rendering").
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.document import PADDING, SOCIAL_NETWORKS, Block, Document, Run
from postwire.broadcasts.blocks.languages import text_direction
from postwire.broadcasts.blocks.links import is_safe_link

BODY_WIDTH = 600
GUTTER = 24  # left and right padding of content, in pixels
UNSUBSCRIBE_URL = "{{{RESEND_UNSUBSCRIBE_URL}}}"
HEADING_SIZES = {1: 28, 2: 22, 3: 18}
DIVIDER_COLOR = "#d4d4d8"
BUTTON_RADII = {"square": "0px", "rounded": "6px", "pill": "999px"}
# Tells mail apps that honour it (Apple Mail, iOS) not to repaint the email: its colours are
# chosen as pairs, shown as they are.
COLOR_SCHEME_CSS = ":root { color-scheme: light; supported-color-schemes: light; }"


def document_to_mjml(document: Document, brand: BrandKit) -> str:
    kit = brand.with_overrides(document.style)
    root = ET.Element("mjml", {"lang": kit.language})
    if text_direction(kit.language) == "rtl":  # left to right stays mrml's default, `auto`
        root.set("dir", "rtl")
    head = ET.SubElement(root, "mj-head")
    raw = ET.SubElement(head, "mj-raw")
    for name in ("color-scheme", "supported-color-schemes"):
        ET.SubElement(raw, "meta", {"name": name, "content": "light"})
    ET.SubElement(head, "mj-style").text = COLOR_SCHEME_CSS
    attributes = ET.SubElement(head, "mj-attributes")
    ET.SubElement(attributes, "mj-all", {"font-family": kit.font_stack})
    body = ET.SubElement(
        root, "mj-body", {"width": f"{BODY_WIDTH}px", "background-color": kit.background}
    )
    if kit.logo_url and is_safe_link(kit.logo_url, images_only=True):
        section = _section(body, kit.background, "16px 0px 8px")
        column = ET.SubElement(section, "mj-column")
        ET.SubElement(
            column,
            "mj-image",
            {
                "src": kit.logo_url,
                "alt": kit.logo_alt,
                "width": f"{kit.logo_width}px",
                "align": kit.align,
                "padding": f"0px {GUTTER}px",
            },
        )
    pending: list[Block] = []
    for block in document.blocks:
        if block.type in ("columns", "footer"):
            _simple_section(body, pending, kit)
            pending = []
            if block.type == "columns":
                _columns_section(body, block, kit)
            else:
                _footer_section(body, block, kit)
        else:
            pending.append(block)
    _simple_section(body, pending, kit)
    return markup(root)


# mrml writes attribute values back with Rust's debug formatting, which would turn a backslash
# into two and a U+2028 or an emoji's U+FE0F into `\u{...}`: in attributes, everything but
# printable ASCII becomes a character reference, which mrml passes through untouched.
_ATTRIBUTE_UNSAFE = re.compile(r'[^\x20-\x7e]|[&<>"\\]')
_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_TEXT_UNSAFE = re.compile(r"[&<>]")


def markup(element: ET.Element) -> str:
    """`element` and its subtree as MJML text: texts and attribute values escaped, an element
    without content written as `<tag />` (mrml writes an HTML element back as `<p></p>`)."""
    parts: list[str] = []
    _write(element, parts)
    return "".join(parts)


def _write(element: ET.Element, parts: list[str]) -> None:
    tag = str(element.tag)
    attributes = "".join(
        f' {name}="{_ATTRIBUTE_UNSAFE.sub(_reference, value)}"'
        for name, value in element.attrib.items()
    )
    if element.text is None and len(element) == 0:
        parts.append(f"<{tag}{attributes} />")
    else:
        parts.append(f"<{tag}{attributes}>")
        parts.append(_TEXT_UNSAFE.sub(_reference, element.text or ""))
        for child in element:
            _write(child, parts)
        parts.append(f"</{tag}>")
    parts.append(_TEXT_UNSAFE.sub(_reference, element.tail or ""))


def _reference(match: re.Match[str]) -> str:
    character = match.group()
    return _NAMED.get(character) or f"&#{ord(character)};"


def _section(parent: ET.Element, background: str, padding: str) -> ET.Element:
    return ET.SubElement(parent, "mj-section", {"background-color": background, "padding": padding})


def _simple_section(body: ET.Element, blocks: list[Block], kit: BrandKit) -> None:
    if not blocks:
        return
    column = ET.SubElement(_section(body, kit.content_background, "12px 0px"), "mj-column")
    for block in blocks:
        _block(column, block, kit, GUTTER, BODY_WIDTH - 2 * GUTTER)


def _columns_section(body: ET.Element, block: Block, kit: BrandKit) -> None:
    background = block.style.background or kit.content_background
    padding = block.style.padding if block.style.padding is not None else PADDING[2]
    section = _section(body, background, f"{padding}px {GUTTER // 2}px")
    # Widths in whole pixels (576 / 2 or 3), so images get a whole `width` attribute.
    column_width = (BODY_WIDTH - GUTTER) // len(block.columns)
    inner_width = column_width - GUTTER
    for column_blocks in block.columns:
        column = ET.SubElement(section, "mj-column", {"width": f"{column_width}px"})
        for inner in column_blocks:
            _block(column, inner, kit, GUTTER // 2, inner_width)


def _block(column: ET.Element, block: Block, kit: BrandKit, gutter: int, max_width: int) -> None:
    vertical = block.style.padding if block.style.padding is not None else PADDING[2]
    padding = f"{vertical}px {gutter}px"
    align = block.style.align or kit.align
    if block.type in ("heading", "paragraph", "list", "social"):
        colour = block.style.color or (
            kit.heading_color if block.type == "heading" else kit.text_color
        )
        text = ET.SubElement(
            column,
            "mj-text",
            {
                "align": align,
                "color": colour,
                "font-size": "16px",
                "line-height": "1.5",
                "padding": padding,
            },
        )
        if block.type == "heading":
            size = HEADING_SIZES[block.level]
            heading = ET.SubElement(
                text,
                f"h{block.level}",
                {
                    "style": f"margin:0;font-size:{size}px;line-height:1.25;"
                    f"font-weight:700;color:{colour}"
                },
            )
            _runs(heading, block.content, kit)
        elif block.type == "paragraph":
            paragraph = ET.SubElement(text, "p", {"style": "margin:0"})
            _runs(paragraph, block.content, kit)
        elif block.type == "list":
            tag = "ol" if block.ordered else "ul"
            items = ET.SubElement(text, tag, {"style": "margin:0;padding:0 0 0 24px"})
            for runs in block.items:
                _runs(ET.SubElement(items, "li", {"style": "margin:0 0 4px"}), runs, kit)
        else:
            _social(text, block, kit)
    elif block.type == "image":
        _image(column, block, max_width, align, padding)
    elif block.type == "button":
        _button(column, block, kit, align, padding)
    elif block.type == "divider":
        colour = block.style.color or DIVIDER_COLOR
        ET.SubElement(
            column,
            "mj-divider",
            {
                "border-color": colour,
                "border-width": "1px",
                "border-style": "solid",
                "padding": padding,
            },
        )
    elif block.type == "spacer":
        ET.SubElement(column, "mj-spacer", {"height": f"{block.height}px"})


def _image(column: ET.Element, block: Block, max_width: int, align: str, padding: str) -> None:
    if not is_safe_link(block.src, images_only=True):
        return  # no picture chosen yet: nothing to show (the checks say so)
    attributes = {
        "src": block.src,
        "alt": block.alt,
        "width": f"{min(block.width, max_width)}px",
        "align": align,
        "padding": padding,
    }
    if max_width < BODY_WIDTH - 2 * GUTTER:
        attributes["fluid-on-mobile"] = "true"  # a column's image fills a phone's width
    if is_safe_link(block.link):
        attributes["href"] = block.link
    ET.SubElement(column, "mj-image", attributes)


def _button(column: ET.Element, block: Block, kit: BrandKit, align: str, padding: str) -> None:
    attributes = {
        "background-color": block.style.background or kit.button_background,
        "color": block.style.color or kit.button_text_color,
        "border-radius": BUTTON_RADII[block.style.shape or kit.button_shape],
        "font-size": "16px",
        "font-weight": "700",
        "inner-padding": "12px 24px",
        "align": align,
        "padding": padding,
    }
    if is_safe_link(block.url):
        attributes["href"] = block.url
    ET.SubElement(column, "mj-button", attributes).text = block.label


def _social(text: ET.Element, block: Block, kit: BrandKit) -> None:
    """Text links, so the email shows no image Postwire does not serve."""
    paragraph = ET.SubElement(text, "p", {"style": "margin:0"})
    shown = [link for link in block.links if is_safe_link(link.url)]
    for index, link in enumerate(shown):
        anchor = ET.SubElement(paragraph, "a", _link_attributes(link.url, kit))
        anchor.text = SOCIAL_NETWORKS[link.network]
        if index < len(shown) - 1:
            anchor.tail = " \u00b7 "


def _footer_section(body: ET.Element, block: Block, kit: BrandKit) -> None:
    colour = block.style.color or kit.text_color
    vertical = block.style.padding if block.style.padding is not None else 24
    column = ET.SubElement(_section(body, kit.background, "0px 0px"), "mj-column")
    text = ET.SubElement(
        column,
        "mj-text",
        {
            "align": block.style.align or "center",
            "color": colour,
            "font-size": "12px",
            "line-height": "1.5",
            "padding": f"{vertical}px {GUTTER}px",
        },
    )
    if block.content:
        _runs(ET.SubElement(text, "p", {"style": "margin:0 0 8px"}), block.content, kit)
    if kit.postal_address:
        address = ET.SubElement(text, "p", {"style": "margin:0 0 8px"})
        _append_text(address, kit.postal_address)
    unsubscribe = ET.SubElement(text, "p", {"style": "margin:0"})
    anchor = ET.SubElement(
        unsubscribe,
        "a",
        {"href": UNSUBSCRIBE_URL, "style": f"color:{colour};text-decoration:underline"},
    )
    anchor.text = block.label or "Unsubscribe"


def _link_attributes(url: str, kit: BrandKit) -> dict[str, str]:
    return {"href": url, "style": f"color:{kit.link_color};text-decoration:underline"}


def _runs(parent: ET.Element, runs: Iterable[Run], kit: BrandKit) -> None:
    for run in runs:
        target = parent
        if run.link and is_safe_link(run.link):
            target = ET.SubElement(target, "a", _link_attributes(run.link, kit))
        if run.bold:
            target = ET.SubElement(target, "strong")
        if run.italic:
            target = ET.SubElement(target, "em")
        _append_text(target, run.shown_text)


def _append_text(element: ET.Element, text: str) -> None:
    """`text` after what `element` holds, a `<br>` for each line break."""
    if "\n" in text:
        lines = text.split("\n")
        _append_text(element, lines[0])
        for line in lines[1:]:
            ET.SubElement(element, "br")
            _append_text(element, line)
        return
    children = list(element)
    if children:
        children[-1].tail = (children[-1].tail or "") + text
    else:
        element.text = (element.text or "") + text
