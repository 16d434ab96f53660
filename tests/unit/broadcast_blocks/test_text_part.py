"""The text part written from the blocks."""

from __future__ import annotations

from postwire.broadcasts.blocks.document import Run, parse_document
from postwire.broadcasts.blocks.text_part import document_to_text, runs_text
from tests.unit.broadcast_blocks.sample_documents import BRAND, document_of


def test_links_lists_buttons_and_the_footer() -> None:
    raw = document_of(
        {"id": "h", "type": "heading", "content": [{"text": "News"}]},
        {
            "id": "p",
            "type": "paragraph",
            "content": [
                {"text": "Read "},
                {"text": "the ", "link": "https://a.example/p"},
                {"text": "post", "bold": True, "link": "https://a.example/p"},
                {"text": ", write to "},
                {"text": "hi@a.example", "link": "mailto:hi@a.example"},
                {"text": " or "},
                {"text": "this", "link": "javascript:alert(1)"},
            ],
        },
        {
            "id": "l",
            "type": "list",
            "ordered": True,
            "items": [[{"text": "One\nmore"}], [{"text": "Two"}]],
        },
        {
            "id": "u",
            "type": "list",
            "items": [[{"field": "contact.city", "fallback": "your town"}]],
        },
        {"id": "b", "type": "button", "label": "Shop", "url": "https://a.example/shop"},
        {
            "id": "i",
            "type": "image",
            "src": "https://a.example/i.png",
            "alt": "A cat",
            "link": "https://a.example/cat",
        },
        {"id": "s", "type": "spacer"},
        {"id": "d", "type": "divider"},
    )
    assert document_to_text(parse_document(raw), BRAND) == (
        "News\n\n"
        "Read the post (https://a.example/p), write to hi@a.example or this\n\n"
        "1. One\n   more\n2. Two\n\n"
        "- {{{contact.city|your town}}}\n\n"
        "Shop: https://a.example/shop\n\n"
        "A cat (https://a.example/cat)\n\n"
        "--------------------\n\n"
        "You get this because you signed up at acme.example.\n\n"
        "Acme Ltd\n1 Harbour Street\nBristol BS1 4QA\n\n"
        "Unsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}\n"
    )


def test_a_link_whose_text_is_its_url_is_written_once() -> None:
    assert (
        runs_text([Run(text="https://a.example", link="https://a.example")]) == "https://a.example"
    )
    assert (
        runs_text([Run(text="x"), Run(field="contact.first_name")]) == "x{{{contact.first_name}}}"
    )
