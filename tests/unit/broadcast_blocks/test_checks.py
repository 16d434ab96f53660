"""The checklist before sending: each check's verdict and message."""

from __future__ import annotations

from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.checks import Check, content_checks
from postwire.broadcasts.blocks.document import parse_document
from tests.unit.broadcast_blocks.sample_documents import BRAND, FOOTER, document_of, full_document

CODES = [
    "unsubscribe_link",
    "postal_address",
    "image_alt",
    "links_valid",
    "button_labels",
    "contrast",
]


def verdicts(checks: list[Check]) -> dict[str, bool]:
    return {check.code: check.passed for check in checks}


def failed(raw: dict[str, object], brand: BrandKit = BRAND) -> dict[str, str]:
    return {
        check.code: check.message
        for check in content_checks(parse_document(raw), brand)
        if not check.passed
    }


def test_a_finished_document_passes_every_check_in_a_fixed_order() -> None:
    checks = content_checks(parse_document(full_document()), BRAND)
    assert [check.code for check in checks] == CODES
    assert all(check.passed for check in checks), checks


def test_without_a_postal_address_the_check_fails() -> None:
    assert failed(full_document(), BrandKit.default()) == {
        "postal_address": "Set your postal address in the brand kit: marketing email must show one."
    }
    assert verdicts(content_checks(parse_document(full_document())))["postal_address"] is False


def test_images_need_a_picture_and_alt_text() -> None:
    no_alt = document_of({"id": "a", "type": "image", "src": "https://x.example/a.png", "alt": " "})
    assert failed(no_alt) == {
        "image_alt": "1 image has no alt text: describe each image for people who cannot see it."
    }
    nested = document_of(
        {
            "id": "c",
            "type": "columns",
            "columns": [
                [{"id": "a", "type": "image", "src": "https://x.example/a.png"}],
                [{"id": "b", "type": "image", "src": "https://x.example/b.png"}],
            ],
        }
    )
    assert failed(nested)["image_alt"].startswith("2 images have no alt text")
    assert failed(document_of({"id": "a", "type": "image", "alt": "x"})) == {
        "image_alt": "1 image has no picture chosen."
    }


def test_links_must_be_web_or_mailto_addresses() -> None:
    for bad in (
        "javascript:alert(1)",
        "https://",
        "ftp://x.example/",
        "/relative",
        "data:text/html,x",
        "mailto:",
    ):
        raw = document_of({"id": "a", "type": "paragraph", "content": [{"text": "x", "link": bad}]})
        assert "links_valid" in failed(raw), bad
    good = document_of(
        {
            "id": "a",
            "type": "paragraph",
            "content": [{"text": "x", "link": "mailto:hi@acme.example"}],
        },
        {
            "id": "b",
            "type": "button",
            "label": "Go",
            "url": "https://acme.example/?e={{{contact.email}}}",
        },
    )
    assert failed(good) == {}
    two = document_of(
        {"id": "a", "type": "button", "label": "Go", "url": "https://"},
        {"id": "b", "type": "social", "links": [{"network": "x", "url": "javascript:x"}]},
    )
    assert failed(two) == {
        "links_valid": "2 links are not a valid web or mailto address, "
        "such as https:// on the button \u201cGo\u201d."
    }
    social = document_of(
        {"id": "a", "type": "social", "links": [{"network": "x", "url": "https://"}]},
        {"id": "b", "type": "paragraph", "content": [{"text": "x", "link": "ftp://x.example/"}]},
    )
    assert failed(social)["links_valid"].endswith("such as https:// among the social links.")
    in_text = document_of(
        {"id": "a", "type": "list", "items": [[{"text": "x", "link": "javascript:x"}]]}
    )
    assert failed(in_text)["links_valid"].endswith("such as javascript:x in a list's text.")


def test_buttons_need_a_label_and_the_footer_an_unsubscribe_text() -> None:
    raw = document_of(
        {"id": "a", "type": "button", "label": "", "url": "https://acme.example"},
        dict(FOOTER, label=""),
    )
    assert failed(raw) == {
        "button_labels": "1 button has no label.",
        "unsubscribe_link": "The footer's unsubscribe link has no text.",
    }


def test_faint_colours_fail_the_contrast_check() -> None:
    pale = document_of(style={"text_color": "#eeeeee"})
    assert failed(pale)["contrast"] == (
        "The text (#eeeeee on #ffffff) is too faint to read, "
        "and can vanish when a mail app darkens the email."
    )
    button = document_of(
        {
            "id": "a",
            "type": "button",
            "label": "Go",
            "url": "https://a.example",
            "style": {"color": "#ffff00", "background": "#ffffff"},
        }
    )
    assert "The button \u201cGo\u201d" in failed(button)["contrast"]
