"""A broadcast document: the editor's blocks as JSON, parsed into typed, validated values.

docs/broadcast-editor.md "Document format" describes the JSON for people. Parsing is strict on
shape (unknown block types or keys, wrong types, bad colours, a missing footer are refused with
a `DocumentError` naming the block) and lenient on what a draft may still lack: an image without
alt text, a button without a label, a link still being typed are kept, reported by
`checks.content_checks` and never rendered as an unsafe link. Sizes out of range are clamped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from postwire.broadcasts.blocks.brand import (
    STYLE_KEYS,
    StyleError,
    check_choice,
    style_value,
    style_values,
)
from postwire.broadcasts.blocks.document_values import (
    DocumentError as DocumentError,  # raised by parse_document: importable from here
)
from postwire.broadcasts.blocks.document_values import (
    checked_boolean,
    checked_text,
    checked_url,
    clamped,
    located,
    refuse_unknown,
    shown,
)

VERSION = 1
BLOCK_TYPES: tuple[str, ...] = (
    "heading",
    "paragraph",
    "list",
    "image",
    "button",
    "divider",
    "spacer",
    "columns",
    "social",
    "footer",
)
# What a column of a `columns` block may hold.
COLUMN_BLOCK_TYPES = ("heading", "paragraph", "list", "image", "button", "divider", "spacer")
SOCIAL_NETWORKS: dict[str, str] = {
    "x": "X",
    "facebook": "Facebook",
    "instagram": "Instagram",
    "linkedin": "LinkedIn",
    "youtube": "YouTube",
    "github": "GitHub",
    "mastodon": "Mastodon",
    "website": "Website",
}
MAX_BLOCKS = 200
MAX_RUNS = 500
MAX_TEXT = 10_000
MAX_LIST_ITEMS = 100
MAX_COLUMN_BLOCKS = 20
MAX_SOCIAL_LINKS = 12
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FIELD = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")
_FALLBACK_FORBIDDEN = re.compile(r"[{}\r\n]")
# Clamps: (least, most, default) in pixels.
PADDING = (0, 64, 12)
SPACER_HEIGHT = (4, 160, 24)
IMAGE_WIDTH = (16, 600, 600)
BLOCK_STYLE_KEYS: dict[str, tuple[str, ...]] = {
    "heading": ("align", "color", "padding"),
    "paragraph": ("align", "color", "padding"),
    "list": ("color", "padding"),
    "image": ("align", "padding"),
    "button": ("align", "padding", "shape", "background", "color"),
    "divider": ("color", "padding"),
    "spacer": (),
    "columns": ("background", "padding"),
    "social": ("align", "padding"),
    "footer": ("align", "color", "padding"),
}


@dataclass(frozen=True, slots=True)
class Run:
    """A piece of text with one formatting, or a personalization field (`field` set: the
    text is then unused and renders as `{{{field|fallback}}}`)."""

    text: str = ""
    bold: bool = False
    italic: bool = False
    link: str = ""
    field: str = ""
    fallback: str = ""

    @property
    def placeholder(self) -> str:
        if self.fallback:
            return "{{{" + self.field + "|" + self.fallback + "}}}"
        return "{{{" + self.field + "}}}"

    @property
    def shown_text(self) -> str:
        return self.placeholder if self.field else self.text


@dataclass(frozen=True, slots=True)
class BlockStyle:
    """A block's own style; None means the document's (or brand kit's) value."""

    align: str | None = None
    color: str | None = None
    background: str | None = None
    padding: int | None = None
    shape: str | None = None


@dataclass(frozen=True, slots=True)
class SocialLink:
    network: str
    url: str


@dataclass(frozen=True, slots=True)
class Block:
    """One block. Which fields matter depends on `type` (see the docs); the others keep
    their defaults."""

    id: str
    type: str
    style: BlockStyle = BlockStyle()
    content: tuple[Run, ...] = ()  # heading, paragraph, footer
    level: int = 1  # heading
    ordered: bool = False  # list
    items: tuple[tuple[Run, ...], ...] = ()  # list
    src: str = ""  # image
    alt: str = ""  # image
    width: int = IMAGE_WIDTH[2]  # image
    link: str = ""  # image
    label: str = ""  # button; footer: the unsubscribe link's text
    url: str = ""  # button
    height: int = SPACER_HEIGHT[2]  # spacer
    columns: tuple[tuple[Block, ...], ...] = ()  # columns
    links: tuple[SocialLink, ...] = ()  # social


@dataclass(frozen=True, slots=True)
class Document:
    style: dict[str, str]  # validated overrides of the brand kit (brand.STYLE_KEYS)
    blocks: tuple[Block, ...]
    version: int = VERSION


def parse_document(raw: object) -> Document:
    """The document `raw` (decoded JSON) describes. Raises `DocumentError`."""
    if not isinstance(raw, dict):
        raise DocumentError("The document must be a JSON object with `version` and `blocks`.")
    refuse_unknown(raw, ("version", "style", "blocks"), "The document")
    version = raw.get("version", VERSION)
    if version != VERSION:
        raise DocumentError(f"This document's `version` must be {VERSION}, not {version!r}.")
    style_raw = raw.get("style", {})
    if not isinstance(style_raw, dict):
        raise DocumentError("The document's `style` must be an object.")
    refuse_unknown(style_raw, STYLE_KEYS, "The document's `style`")
    try:
        style = style_values(style_raw, "The document's style")
    except StyleError as error:
        raise DocumentError(str(error)) from None
    blocks_raw = raw.get("blocks")
    if not isinstance(blocks_raw, list):
        raise DocumentError("The document's `blocks` must be a list.")
    if len(blocks_raw) > MAX_BLOCKS:
        raise DocumentError(f"A document holds at most {MAX_BLOCKS} blocks.")
    seen: set[str] = set()
    blocks = tuple(
        _parse_block(item, f"Block {number}", BLOCK_TYPES, seen)
        for number, item in enumerate(blocks_raw, start=1)
    )
    footers = [number for number, block in enumerate(blocks, start=1) if block.type == "footer"]
    if not footers:
        raise DocumentError("The document needs a footer block (it holds the unsubscribe link).")
    if len(footers) > 1:
        raise DocumentError(
            f"A document has one footer; blocks {footers[0]} and {footers[1]} are both footers."
        )
    if footers[0] != len(blocks):
        raise DocumentError("The footer must be the last block.")
    return Document(style=style, blocks=blocks)


def default_block(block_type: str) -> dict[str, object]:
    """A new block's JSON, as the editor adds it (its id is the editor's to set)."""
    defaults: dict[str, dict[str, object]] = {
        "heading": {"level": 2, "content": [{"text": "A heading"}]},
        "paragraph": {"content": [{"text": "Write something here."}]},
        "list": {
            "ordered": False,
            "items": [[{"text": "First point"}], [{"text": "Second point"}]],
        },
        "image": {"src": "", "alt": "", "width": 600, "link": ""},
        "button": {"label": "Learn more", "url": "https://"},
        "divider": {},
        "spacer": {"height": SPACER_HEIGHT[2]},
        "columns": {
            "columns": [
                [{"id": "c1", "type": "paragraph", "content": [{"text": "Left column"}]}],
                [{"id": "c2", "type": "paragraph", "content": [{"text": "Right column"}]}],
            ]
        },
        "social": {"links": [{"network": "website", "url": "https://"}]},
        "footer": {"content": [], "label": "Unsubscribe"},
    }
    if block_type not in defaults:
        raise DocumentError(f"There is no block type `{block_type}`.")
    return {"id": block_type, "type": block_type, **defaults[block_type]}


def empty_document() -> dict[str, object]:
    """A new broadcast's document: a heading, a paragraph and the footer."""
    return {
        "version": VERSION,
        "style": {},
        "blocks": [
            {"id": "b1", "type": "heading", "level": 1, "content": [{"text": "Your headline"}]},
            {
                "id": "b2",
                "type": "paragraph",
                "content": [
                    {"text": "Hi "},
                    {"field": "contact.first_name", "fallback": "there"},
                    {"text": ", write your message here."},
                ],
            },
            {"id": "b3", "type": "footer", "content": [], "label": "Unsubscribe"},
        ],
    }


_BLOCK_KEYS: dict[str, tuple[str, ...]] = {
    "heading": ("level", "content"),
    "paragraph": ("content",),
    "list": ("ordered", "items"),
    "image": ("src", "alt", "width", "link"),
    "button": ("label", "url"),
    "divider": (),
    "spacer": ("height",),
    "columns": ("columns",),
    "social": ("links",),
    "footer": ("content", "label"),
}


def _parse_block(raw: object, where: str, allowed: tuple[str, ...], seen: set[str]) -> Block:
    if not isinstance(raw, dict):
        raise DocumentError(f"{where} must be an object with `id` and `type`.")
    block_type = raw.get("type")
    if not isinstance(block_type, str) or block_type not in BLOCK_TYPES:
        raise DocumentError(f"{where} has an unknown type {shown(block_type)}.")
    where = f"{where} ({block_type})"
    if block_type not in allowed:
        raise DocumentError(f"{where} cannot be placed in a column.")
    block_id = raw.get("id")
    if not isinstance(block_id, str) or not _ID.fullmatch(block_id):
        raise DocumentError(f"{where} needs an `id` of 1 to 64 letters, digits, `-` or `_`.")
    if block_id in seen:
        raise DocumentError(f"{where} has the id `{block_id}` of an earlier block.")
    seen.add(block_id)
    with located(block_id):
        return _parse_block_fields(raw, block_id, block_type, where, seen)


def _parse_block_fields(
    raw: dict[str, object], block_id: str, block_type: str, where: str, seen: set[str]
) -> Block:
    refuse_unknown(raw, ("id", "type", "style", *_BLOCK_KEYS[block_type]), where)
    fields: dict[str, object] = {"id": block_id, "type": block_type}
    with located(field="style"):
        fields["style"] = _parse_block_style(raw.get("style", {}), block_type, where)
    if block_type in ("heading", "paragraph", "footer"):
        with located(field="content"):
            fields["content"] = _parse_runs(raw.get("content", []), where)
    if block_type == "heading":
        level = raw.get("level", 1)
        if level not in (1, 2, 3) or isinstance(level, bool):
            raise DocumentError(f"{where}: `level` must be 1, 2 or 3.")
        fields["level"] = level
    elif block_type == "list":
        with located(field="ordered"):
            fields["ordered"] = checked_boolean(raw.get("ordered", False), f"{where}: `ordered`")
        with located(field="items"):
            fields["items"] = _parse_items(raw.get("items", []), where)
    elif block_type == "image":
        with located(field="src"):
            fields["src"] = checked_url(raw.get("src", ""), f"{where}: `src`")
        with located(field="alt"):
            fields["alt"] = checked_text(raw.get("alt", ""), f"{where}: `alt`", 500).strip()
        with located(field="width"):
            fields["width"] = clamped(
                raw.get("width", IMAGE_WIDTH[2]), IMAGE_WIDTH, f"{where}: `width`"
            )
        with located(field="link"):
            fields["link"] = checked_url(raw.get("link", ""), f"{where}: `link`")
    elif block_type == "button":
        with located(field="label"):
            fields["label"] = checked_text(raw.get("label", ""), f"{where}: `label`", 200).strip()
        with located(field="url"):
            fields["url"] = checked_url(raw.get("url", ""), f"{where}: `url`")
    elif block_type == "footer":
        with located(field="label"):
            fields["label"] = checked_text(
                raw.get("label", "Unsubscribe"), f"{where}: `label`", 200
            ).strip()
    elif block_type == "spacer":
        with located(field="height"):
            fields["height"] = clamped(
                raw.get("height", SPACER_HEIGHT[2]), SPACER_HEIGHT, f"{where}: `height`"
            )
    elif block_type == "columns":
        fields["columns"] = _parse_columns(raw.get("columns"), where, seen)
    elif block_type == "social":
        fields["links"] = _parse_social(raw.get("links", []), where)
    return Block(**fields)  # type: ignore[arg-type]


def _parse_columns(raw: object, where: str, seen: set[str]) -> tuple[tuple[Block, ...], ...]:
    if not isinstance(raw, list) or len(raw) not in (2, 3):
        raise DocumentError(f"{where}: `columns` must be a list of 2 or 3 columns.")
    columns = []
    for number, column in enumerate(raw, start=1):
        place = f"{where}, column {number}"
        if not isinstance(column, list) or len(column) > MAX_COLUMN_BLOCKS:
            raise DocumentError(f"{place} must be a list of at most {MAX_COLUMN_BLOCKS} blocks.")
        columns.append(
            tuple(
                _parse_block(item, f"{place}, block {index}", COLUMN_BLOCK_TYPES, seen)
                for index, item in enumerate(column, start=1)
            )
        )
    return tuple(columns)


def _parse_social(raw: object, where: str) -> tuple[SocialLink, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_SOCIAL_LINKS:
        raise DocumentError(f"{where}: `links` must be a list of at most {MAX_SOCIAL_LINKS} links.")
    links = []
    for number, item in enumerate(raw, start=1):
        place = f"{where}, link {number}"
        if not isinstance(item, dict):
            raise DocumentError(f"{place} must be an object with `network` and `url`.")
        refuse_unknown(item, ("network", "url"), place)
        try:
            network = check_choice(item.get("network"), SOCIAL_NETWORKS, f"{place}: `network`")
        except StyleError as error:
            raise DocumentError(str(error)) from None
        # The editor's controls of the link are numbered from 0.
        with located(field=f"url-{number - 1}"):
            url = checked_url(item.get("url", ""), f"{place}: `url`")
        links.append(SocialLink(network, url))
    return tuple(links)


def _parse_items(raw: object, where: str) -> tuple[tuple[Run, ...], ...]:
    if not isinstance(raw, list) or len(raw) > MAX_LIST_ITEMS:
        raise DocumentError(f"{where}: `items` must be a list of at most {MAX_LIST_ITEMS} items.")
    return tuple(
        _parse_runs(item, f"{where}, item {number}") for number, item in enumerate(raw, start=1)
    )


def _parse_block_style(raw: object, block_type: str, where: str) -> BlockStyle:
    if not isinstance(raw, dict):
        raise DocumentError(f"{where}: `style` must be an object.")
    refuse_unknown(raw, BLOCK_STYLE_KEYS[block_type], f"{where}'s style")
    values: dict[str, object] = {}
    try:
        for key, value in raw.items():
            place = f"{where}: style `{key}`"
            if value is None:
                continue  # the document's value, as if left out
            if key == "padding":
                values[key] = clamped(value, PADDING, place)
            else:
                values[key] = style_value(key, value, place)
    except StyleError as error:
        raise DocumentError(str(error)) from None
    return BlockStyle(**values)  # type: ignore[arg-type]


def _parse_runs(raw: object, where: str) -> tuple[Run, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_RUNS:
        raise DocumentError(f"{where}: the text must be a list of at most {MAX_RUNS} runs.")
    runs = []
    for number, item in enumerate(raw, start=1):
        place = f"{where}, text part {number}"
        if not isinstance(item, dict):
            raise DocumentError(f'{place} must be an object such as {{"text": "Hello"}}.')
        refuse_unknown(item, ("text", "bold", "italic", "link", "field", "fallback"), place)
        bold = checked_boolean(item.get("bold", False), f"{place}: `bold`")
        italic = checked_boolean(item.get("italic", False), f"{place}: `italic`")
        link = checked_url(item.get("link", ""), f"{place}: `link`")
        if "field" in item:
            field = item["field"]
            if not isinstance(field, str) or not _FIELD.fullmatch(field):
                raise DocumentError(
                    f"{place}: `field` must be a name such as contact.first_name, "
                    f"not {shown(field)}."
                )
            fallback = checked_text(item.get("fallback", ""), f"{place}: `fallback`", 200).strip()
            if _FALLBACK_FORBIDDEN.search(fallback):
                raise DocumentError(f"{place}: a fallback cannot hold braces or line breaks.")
            runs.append(Run(bold=bold, italic=italic, link=link, field=field, fallback=fallback))
        else:
            text = checked_text(item.get("text", ""), f"{place}: `text`", MAX_TEXT).replace(
                "\r\n", "\n"
            )
            runs.append(Run(text=text.replace("\r", "\n"), bold=bold, italic=italic, link=link))
    return tuple(runs)
