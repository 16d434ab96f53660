"""Rendering documents: golden HTML and text per block type and for a full document, the same
bytes every time, email-client safety of every block, and personalization by the engine."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.document import BLOCK_TYPES, parse_document
from postwire.broadcasts.blocks.mjml import document_to_mjml
from postwire.broadcasts.blocks.render import RenderedEmail, render_document
from postwire.broadcasts.messages import compile_broadcast
from postwire.store.broadcasts import BroadcastRecord
from postwire.templates.placeholders import contact_values
from tests.unit.broadcast_blocks.email_safety import email_safety_faults
from tests.unit.broadcast_blocks.sample_documents import (
    BRAND,
    document_of,
    full_document,
    single_block,
)

GOLDEN = Path(__file__).parent / "golden"
CASES = {f"block-{kind}": single_block(kind) for kind in BLOCK_TYPES} | {"full": full_document()}


def rendered(raw: dict[str, object], brand: BrandKit = BRAND) -> RenderedEmail:
    return render_document(parse_document(raw), brand)


def matches_golden(name: str, email: RenderedEmail) -> None:
    for suffix, content in ((".html", email.html), (".txt", email.text)):
        path = GOLDEN / f"{name}{suffix}"
        if os.environ.get("POSTWIRE_UPDATE_GOLDEN"):
            path.write_text(content)
        assert content == path.read_text(), f"{path.name} changed"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_html_and_text(name: str) -> None:
    matches_golden(name, rendered(CASES[name]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_block_is_safe_for_mail_clients(name: str) -> None:
    html = rendered(CASES[name]).html
    assert email_safety_faults(html) == []
    assert (
        html.count("<img")
        == CASES[name].__repr__().count("https://mail.example.com/images/0f1e") + 1
    )
    assert "{{{RESEND_UNSUBSCRIBE_URL}}}" in html


def test_the_same_document_gives_the_same_bytes() -> None:
    first = rendered(full_document())
    for _ in range(3):
        assert rendered(full_document()) == first
    assert document_to_mjml(parse_document(full_document()), BRAND) == document_to_mjml(
        parse_document(full_document()), BRAND
    )


def test_a_600_px_body_that_reflows_with_declared_colours() -> None:
    html = rendered(full_document()).html
    assert "max-width:600px" in html.replace(" ", "")
    assert "@media only screen and (min-width:480px)" in html  # columns stack below it
    assert '<meta name="color-scheme" content="light"' in html
    assert "color-scheme: light" in html


def test_the_language_is_the_emails_and_right_to_left_ones_set_the_direction() -> None:
    assert '<html lang="en" dir="auto"' in rendered(full_document()).html
    french = rendered({**full_document(), "style": {"language": "fr"}}).html
    assert '<html lang="fr" dir="auto"' in french
    arabic = rendered(full_document(), BrandKit.from_json({"language": "ar"})).html
    assert '<html lang="ar" dir="rtl"' in arabic
    assert 'role="article" lang="ar" dir="rtl"' in arabic  # the body, for apps that drop <html>


def test_values_are_escaped_and_unsafe_links_dropped() -> None:
    raw = document_of(
        {
            "id": "p",
            "type": "paragraph",
            "content": [
                {"text": '<script>alert("x")</script> & "quotes"'},
                {"text": "click", "link": "javascript:alert(1)"},
                {"text": "ok", "link": 'https://a.example/?q="><script>'},
            ],
        },
        {"id": "b", "type": "button", "label": "<b>Go</b>", "url": "javascript:alert(1)"},
        {
            "id": "i",
            "type": "image",
            "src": "https://a.example/x.png",
            "alt": '"><script>',
            "link": "data:x",
        },
    )
    html = rendered(raw).html
    assert "<script" not in html
    assert '&lt;script&gt;alert("x")&lt;/script&gt; &amp; "quotes"' in html
    assert "javascript:" not in html and "data:x" not in html
    assert "&lt;b&gt;Go&lt;/b&gt;" in html
    assert email_safety_faults(html) == []


@pytest.mark.parametrize(
    "text",
    [
        "</mj-text><mj-raw><script>x</script></mj-raw>",
        "<!-- c --> <![CDATA[x]]> <?xml?>",
        "&amp; &#x3c; &lt; \"q\" 's'",
        "emoji \U0001f389 \u2764\ufe0f e\u0301 \u00fcn\u00efc\u00f8d\u00e9 \u2028 a\ttab",
        "back\\slash C:\\path \\u{41}",
    ],
)
def test_text_that_looks_like_markup_stays_text(text: str) -> None:
    runs = [{"text": text}]
    raw = document_of(
        {"id": "p", "type": "paragraph", "content": runs},
        {"id": "i", "type": "image", "src": "https://a.example/i.png", "alt": text},
        {"id": "b", "type": "button", "label": text, "url": "https://a.example/"},
    )
    html = rendered(raw, BrandKit(postal_address=text)).html
    assert email_safety_faults(html) == []
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert f'<p style="margin:0">{escaped}</p>' in html
    assert image_alts(html) == [text]  # as a browser reads the attribute


def image_alts(html: str) -> list[str]:
    found: list[str] = []

    class Images(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "img":
                found.append(dict(attrs).get("alt") or "")

    Images(convert_charrefs=True).feed(html)
    return found


def test_a_fallback_is_escaped_in_the_html_and_plain_in_the_text() -> None:
    chip = {"field": "contact.company", "fallback": "Tom & <Jerry>"}
    email = rendered(document_of({"id": "p", "type": "paragraph", "content": [chip]}))
    assert "{{{contact.company|Tom &amp; &lt;Jerry&gt;}}}" in email.html
    assert email.text.startswith("{{{contact.company|Tom & <Jerry>}}}\n")
    record = BroadcastRecord(
        id="b1",
        team_id="t1",
        segment_id="s1",
        sender="n@acme.example",
        subject="s",
        created_at="2026-11-25T08:00:00Z",
        html=email.html,
        text=email.text,
    )
    request = compile_broadcast(record).request_for("a@example.org", {}, [])
    assert request.html is not None and ">Tom &amp; &lt;Jerry&gt;</p>" in request.html
    assert request.text is not None and request.text.startswith("Tom & <Jerry>\n")


def test_an_image_without_a_picture_is_left_out() -> None:
    html = rendered(document_of({"id": "i", "type": "image", "alt": "x"}), BrandKit.default()).html
    assert "<img" not in html


def test_the_engine_personalizes_a_rendered_document() -> None:
    email = rendered(full_document())
    record = BroadcastRecord(
        id="b1",
        team_id="t1",
        segment_id="s1",
        sender="Acme <news@acme.example>",
        subject="News for {{{contact.first_name|you}}}",
        created_at="2026-11-25T08:00:00Z",
        html=email.html,
        text=email.text,
        preview_text="Our offers, {{{contact.first_name|friend}}}",
    )
    content = compile_broadcast(record)
    unsubscribe = "https://mail.acme.example/u/TOKEN?a=1&b=2"
    values = contact_values("ann@example.org", "Ann & Co", None, {}, {}, unsubscribe)
    request = content.request_for("ann@example.org", values, [])
    assert request.html is not None and request.text is not None
    assert "Hi Ann &amp; Co, this is" in request.html
    assert ">Our offers, Ann &amp; Co</div>" in request.html  # the preview text, first in the body
    assert 'href="https://mail.acme.example/u/TOKEN?a=1&amp;b=2"' in request.html
    assert "{{{" not in request.html and "{{{" not in request.text
    assert request.text.startswith("November news & <offers>\n\nHi Ann & Co, this is bold")
    assert request.text.endswith("Unsubscribe: https://mail.acme.example/u/TOKEN?a=1&b=2\n")
    anonymous = content.request_for(
        "x@example.org", contact_values("x@example.org", None, None, {}, {}, unsubscribe), []
    )
    assert anonymous.html is not None and "Hi there, this is" in anonymous.html
