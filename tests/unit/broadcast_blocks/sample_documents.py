"""Documents the block tests render: one per block type and a full newsletter."""

from __future__ import annotations

from postwire.broadcasts.blocks.brand import BrandKit

IMAGE = "https://mail.example.com/images/0f1e2d3c.png"
BRAND = BrandKit(
    postal_address="Acme Ltd\n1 Harbour Street\nBristol BS1 4QA",
    logo_url="https://mail.example.com/images/logo.png",
    logo_alt="Acme",
)
FOOTER: dict[str, object] = {
    "id": "footer",
    "type": "footer",
    "content": [{"text": "You get this because you signed up at acme.example."}],
    "label": "Unsubscribe",
}

BLOCKS: dict[str, dict[str, object]] = {
    "heading": {
        "id": "h",
        "type": "heading",
        "level": 1,
        "content": [{"text": "November news & <offers>"}],
        "style": {"align": "center"},
    },
    "paragraph": {
        "id": "p",
        "type": "paragraph",
        "content": [
            {"text": "Hi "},
            {"field": "contact.first_name", "fallback": "there"},
            {"text": ", this is "},
            {"text": "bold", "bold": True},
            {"text": " and "},
            {"text": "italic", "italic": True},
            {"text": ". Read "},
            {"text": "the post", "link": "https://example.com/post?a=1&b=2"},
            {"text": ".\nA second line."},
        ],
    },
    "list": {
        "id": "l",
        "type": "list",
        "ordered": False,
        "items": [
            [{"text": "One"}],
            [{"text": "Two, "}, {"text": "linked", "link": "https://example.com/2"}],
        ],
    },
    "image": {
        "id": "i",
        "type": "image",
        "src": IMAGE,
        "alt": "Our new shop at night",
        "width": 600,
        "link": "https://example.com/shop",
    },
    "button": {
        "id": "btn",
        "type": "button",
        "label": "Shop now",
        "url": "https://example.com/shop",
        "style": {"shape": "pill", "align": "center"},
    },
    "divider": {"id": "d", "type": "divider"},
    "spacer": {"id": "s", "type": "spacer", "height": 32},
    "columns": {
        "id": "c",
        "type": "columns",
        "columns": [
            [{"id": "c1", "type": "image", "src": IMAGE, "alt": "Left picture", "width": 600}],
            [
                {"id": "c2", "type": "heading", "level": 3, "content": [{"text": "Beside it"}]},
                {
                    "id": "c3",
                    "type": "paragraph",
                    "content": [{"text": "Text in the second column."}],
                },
            ],
            [{"id": "c4", "type": "button", "label": "Go", "url": "https://example.com/go"}],
        ],
    },
    "social": {
        "id": "so",
        "type": "social",
        "links": [
            {"network": "github", "url": "https://github.com/acme"},
            {"network": "linkedin", "url": "https://www.linkedin.com/company/acme"},
            {"network": "website", "url": "https://acme.example"},
        ],
        "style": {"align": "center"},
    },
    "footer": FOOTER,
}


def document_of(
    *blocks: dict[str, object], style: dict[str, object] | None = None
) -> dict[str, object]:
    """A document of `blocks` followed by the footer (unless one is given)."""
    listed = list(blocks)
    if not any(block["type"] == "footer" for block in listed):
        listed.append(FOOTER)
    return {"version": 1, "style": style or {}, "blocks": listed}


def single_block(block_type: str) -> dict[str, object]:
    return document_of(BLOCKS[block_type])


def full_document() -> dict[str, object]:
    """Every block type once, in a newsletter's order."""
    order = (
        "heading",
        "paragraph",
        "image",
        "list",
        "button",
        "divider",
        "columns",
        "spacer",
        "social",
    )
    return document_of(*(BLOCKS[name] for name in order), style={"button_shape": "rounded"})


def typical_document(size: int = 20) -> dict[str, object]:
    """`size` blocks (the footer included) cycling through the block types, unique ids."""
    order = (
        "heading",
        "paragraph",
        "image",
        "paragraph",
        "button",
        "list",
        "divider",
        "columns",
        "social",
    )
    blocks = []
    for index in range(size - 1):
        block = renamed(BLOCKS[order[index % len(order)]], f"n{index}")
        blocks.append(block)
    return document_of(*blocks)


def renamed(block: dict[str, object], prefix: str) -> dict[str, object]:
    """`block` with its id (and its columns' ids) prefixed, so copies can share a document."""
    copy = dict(block, id=f"{prefix}-{block['id']}")
    columns = block.get("columns")
    if isinstance(columns, list):
        copy["columns"] = [[renamed(inner, prefix) for inner in column] for column in columns]
    return copy
