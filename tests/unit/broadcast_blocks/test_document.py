"""Parsing and validating broadcast documents: what is accepted, clamped and refused, and the
messages a person reads when a document is refused."""

from __future__ import annotations

import pytest

from postwire.broadcasts.blocks.brand import BrandKit, StyleError
from postwire.broadcasts.blocks.document import (
    BLOCK_TYPES,
    DocumentError,
    default_block,
    empty_document,
    parse_document,
)
from tests.unit.broadcast_blocks.sample_documents import BLOCKS, FOOTER, document_of, full_document


def test_the_empty_document_and_every_default_block_parse() -> None:
    document = parse_document(empty_document())
    assert [block.type for block in document.blocks] == ["heading", "paragraph", "footer"]
    chip = document.blocks[1].content[1]
    assert (chip.field, chip.fallback, chip.placeholder) == (
        "contact.first_name",
        "there",
        "{{{contact.first_name|there}}}",
    )
    blocks = [dict(default_block(kind), id=f"x{n}") for n, kind in enumerate(BLOCK_TYPES[:-1])]
    parsed = parse_document(document_of(*blocks))
    assert [block.type for block in parsed.blocks] == list(BLOCK_TYPES)


def test_a_full_document_parses_with_nested_columns() -> None:
    document = parse_document(full_document())
    columns = next(block for block in document.blocks if block.type == "columns")
    assert [len(column) for column in columns.columns] == [1, 2, 1]
    assert columns.columns[1][0].level == 3
    assert document.style == {"button_shape": "rounded"}


def test_colours_are_normalized_and_sizes_clamped() -> None:
    document = parse_document(
        document_of(
            {"id": "a", "type": "paragraph", "style": {"color": "#ABC", "padding": 500}},
            {"id": "b", "type": "spacer", "height": 1},
            {
                "id": "c",
                "type": "image",
                "src": "https://x.example/a.png",
                "alt": "a",
                "width": 4000,
            },
            {"id": "d", "type": "heading", "style": {"padding": -3, "align": None}},
            style={"text_color": "#112233"},
        )
    )
    paragraph, spacer, image, heading, _ = document.blocks
    assert (paragraph.style.color, paragraph.style.padding) == ("#aabbcc", 64)
    assert spacer.height == 4
    assert image.width == 600
    assert (heading.style.padding, heading.style.align) == (0, None)


def test_a_draft_may_be_unfinished() -> None:
    document = parse_document(
        document_of(
            {"id": "a", "type": "image"},
            {"id": "b", "type": "button", "label": "", "url": "https://"},
            {
                "id": "c",
                "type": "paragraph",
                "content": [{"text": "x", "link": "javascript:alert(1)"}],
            },
        )
    )
    assert document.blocks[0].src == "" and document.blocks[0].alt == ""
    assert document.blocks[2].content[0].link == "javascript:alert(1)"  # kept, never rendered


REFUSALS: list[tuple[object, str]] = [
    (None, "The document must be a JSON object"),
    ({"blocks": "x"}, "`blocks` must be a list"),
    ({"version": 2, "blocks": []}, "`version` must be 1"),
    ({"blocks": [], "html": "<p>"}, "The document has an unknown field 'html'"),
    ({"blocks": []}, "needs a footer block"),
    ({"blocks": [FOOTER, {"id": "a", "type": "divider"}]}, "The footer must be the last block"),
    ({"blocks": [dict(FOOTER, id="f1"), FOOTER]}, "blocks 1 and 2 are both footers"),
    (document_of({"id": "a", "type": "video"}), "Block 1 has an unknown type 'video'"),
    (document_of({"type": "divider"}), "Block 1 (divider) needs an `id`"),
    (document_of({"id": "a b", "type": "divider"}), "Block 1 (divider) needs an `id`"),
    (
        document_of({"id": "a", "type": "divider"}, {"id": "a", "type": "spacer"}),
        "Block 2 (spacer) has the id `a` of an earlier block",
    ),
    (
        document_of({"id": "a", "type": "heading", "level": 7}),
        "Block 1 (heading): `level` must be 1, 2 or 3",
    ),
    (
        document_of({"id": "a", "type": "button", "style": {"background": "blue"}}),
        "Block 1 (button): style `background` must be a colour like #1a2b3c or #abc, not 'blue'",
    ),
    (
        document_of({"id": "a", "type": "button", "style": {"shape": "round"}}),
        "style `shape` must be one of square, rounded, pill",
    ),
    (
        document_of({"id": "a", "type": "spacer", "style": {"color": "#fff"}}),
        "Block 1 (spacer)'s style has an unknown field 'color'",
    ),
    (
        document_of({"id": "a", "type": "spacer", "height": "big"}),
        "`height` must be a number of pixels",
    ),
    (
        document_of(
            {"id": "a", "type": "paragraph", "content": [{"text": "x", "underline": True}]}
        ),
        "Block 1 (paragraph), text part 1 has an unknown field 'underline'",
    ),
    (
        document_of({"id": "a", "type": "paragraph", "content": [{"text": "<b>", "bold": "yes"}]}),
        "text part 1: `bold` must be true or false",
    ),
    (
        document_of({"id": "a", "type": "paragraph", "content": [{"field": "contact.first name"}]}),
        "`field` must be a name such as contact.first_name",
    ),
    (
        document_of(
            {"id": "a", "type": "paragraph", "content": [{"field": "contact.x", "fallback": "}}}"}]}
        ),
        "a fallback cannot hold braces or line breaks",
    ),
    (
        document_of({"id": "a", "type": "paragraph", "content": [{"text": "a\x00b"}]}),
        "holds a control character",
    ),
    (document_of({"id": "a", "type": "button", "url": "https://a b"}), "`url` cannot hold spaces"),
    (
        document_of({"id": "a", "type": "columns", "columns": [[]]}),
        "`columns` must be a list of 2 or 3 columns",
    ),
    (
        document_of({"id": "a", "type": "columns", "columns": [[], [BLOCKS["social"]]]}),
        "Block 1 (columns), column 2, block 1 (social) cannot be placed in a column",
    ),
    (
        document_of(
            {"id": "a", "type": "social", "links": [{"network": "myspace", "url": "https://x"}]}
        ),
        "Block 1 (social), link 1: `network` must be one of x, facebook",
    ),
    (
        document_of({"id": "a", "type": "image", "width": float("nan")}),
        "Block 1 (image): `width` must be a number of pixels",
    ),
    (document_of(style={"font": "Comic Sans"}), "The document's style `font` must be one of arial"),
    (document_of(style={"colour": "#fff"}), "The document's `style` has an unknown field 'colour'"),
    (
        document_of(*[dict[str, object](id=f"b{n}", type="divider") for n in range(200)]),
        "at most 200 blocks",
    ),
]


@pytest.mark.parametrize(("raw", "message"), REFUSALS)
def test_bad_documents_are_refused_with_a_readable_message(raw: object, message: str) -> None:
    with pytest.raises(DocumentError, match=None) as refused:
        parse_document(raw)
    assert message in str(refused.value)


def test_default_block_refuses_an_unknown_type() -> None:
    with pytest.raises(DocumentError, match="There is no block type `video`"):
        default_block("video")


def test_the_brand_kit_round_trips_and_refuses_bad_values() -> None:
    kit = BrandKit.from_json(
        {"text_color": "#ABC", "postal_address": " 1 Road\nTown ", "logo_width": 9999}
    )
    assert (kit.text_color, kit.postal_address, kit.logo_width) == ("#aabbcc", "1 Road\nTown", 600)
    assert BrandKit.from_json(kit.to_json()) == kit
    assert BrandKit.from_json({}) == BrandKit.default()
    for raw, message in [
        ({"font": "papyrus"}, "`font` must be one of"),
        ({"language": "klingon"}, "`language` must be a language tag of the editor's list"),
        ({"logo_url": "javascript:alert(1)"}, "`logo_url` must be an http(s) URL"),
        ({"twitter": "x"}, "no field `twitter`"),
        ({"button_background": "#12345"}, "`button_background` must be a colour"),
        ({"logo_width": float("nan")}, "`logo_width` must be a number of pixels"),
        ([], "must be a JSON object"),
    ]:
        with pytest.raises(StyleError) as refused:
            BrandKit.from_json(raw)
        assert message in str(refused.value)
