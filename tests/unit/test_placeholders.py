"""Placeholders: the grammar, escaping, fallbacks and the values a contact gives."""

import pytest

from postwire.templates.placeholders import (
    compile_placeholders,
    contact_values,
    format_value,
)

VALUES = {
    "FIRST_NAME": "Ann",
    "contact.first_name": "Ann",
    "contact.plan": "Pro & Co <b>",
    "URL": "https://example.com/u?a=1&b=2",
    "EMPTY": "",
}


@pytest.mark.parametrize(
    ("text", "plain", "as_html"),
    [
        ("Hi {{{FIRST_NAME}}}!", "Hi Ann!", "Hi Ann!"),
        ("Hi {{{ FIRST_NAME }}}!", "Hi Ann!", "Hi Ann!"),
        ("Hi {{{\tFIRST_NAME\t|x}}}!", "Hi Ann!", "Hi Ann!"),
        ("Hi {{{contact.first_name|there}}}", "Hi Ann", "Hi Ann"),
        ("Hi {{{contact.last_name|there}}}", "Hi there", "Hi there"),
        ("Hi {{{contact.last_name| dear friend }}}", "Hi dear friend", "Hi dear friend"),
        ("Hi {{{contact.last_name|}}}.", "Hi .", "Hi ."),
        ("Hi {{{LAST_NAME}}}.", "Hi .", "Hi ."),
        ("Hi {{{EMPTY|you}}}", "Hi you", "Hi you"),
        ("{{{contact.plan}}}", "Pro & Co <b>", "Pro &amp; Co &lt;b&gt;"),
        (
            '<a href="{{{URL}}}">',
            '<a href="https://example.com/u?a=1&b=2">',
            '<a href="https://example.com/u?a=1&amp;b=2">',
        ),
        # The fallback is the author's own source: inserted as written.
        ("{{{NOPE|<b>you</b>}}}", "<b>you</b>", "<b>you</b>"),
        # Malformed placeholders stay text.
        ("{{{FIRST_NAME}}", "{{{FIRST_NAME}}", "{{{FIRST_NAME}}"),
        ("{{FIRST_NAME}}", "{{FIRST_NAME}}", "{{FIRST_NAME}}"),
        ("{{{first name}}}", "{{{first name}}}", "{{{first name}}}"),
        ("{{{}}}", "{{{}}}", "{{{}}}"),
        ("{{{A|b\nc}}}", "{{{A|b\nc}}}", "{{{A|b\nc}}}"),
        ("{{{A|b}c}}}", "{{{A|b}c}}}", "{{{A|b}c}}}"),
        ("{{{{FIRST_NAME}}}}", "{Ann}", "{Ann}"),
        ("{{{ {{{FIRST_NAME}}}", "{{{ Ann", "{{{ Ann"),
        ("a { b } c", "a { b } c", "a { b } c"),
        ("", "", ""),
        ("{{{FIRST_NAME}}}{{{FIRST_NAME}}}", "AnnAnn", "AnnAnn"),
        # Case-sensitive names.
        ("{{{first_name|x}}}", "x", "x"),
    ],
)
def test_render(text: str, plain: str, as_html: str) -> None:
    compiled = compile_placeholders(text)
    assert compiled.render(VALUES, escape_html=False) == plain
    assert compiled.render(VALUES, escape_html=True) == as_html


def test_names_in_first_appearance_order() -> None:
    compiled = compile_placeholders("{{{B}}} {{{A|x}}} {{{B|y}}} {{{contact.k}}} {{{A}}}")
    assert compiled.names == ("B", "A", "contact.k")
    assert compiled.names_without_fallback == ("B", "contact.k", "A")
    assert compile_placeholders("no placeholders").names == ()


def test_render_reuses_compiled_parts() -> None:
    compiled = compile_placeholders("Hi {{{N|you}}}")
    assert compiled.render({"N": "Ann"}, escape_html=False) == "Hi Ann"
    assert compiled.render({}, escape_html=False) == "Hi you"
    assert compiled.render({"N": "Bob"}, escape_html=False) == "Hi Bob"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        ("x", "x"),
        (3, "3"),
        (3.0, "3"),
        (-2.0, "-2"),
        (2.5, "2.5"),
        (9007199254740991, "9007199254740991"),
        (1e20, "100000000000000000000"),
        (float("nan"), "nan"),
        (True, "true"),
        (False, "false"),
        ({"a": [1, "é"]}, '{"a":[1,"é"]}'),
        ([1, 2], "[1,2]"),
    ],
)
def test_format_value(value: object, text: str) -> None:
    assert format_value(value) == text


def test_contact_values() -> None:
    values = contact_values(
        "ann@example.com",
        "Ann",
        None,
        {"plan": "pro", "seats": 3.0, "blank": ""},
        {"plan": "free", "company": "ACME", "age": 0, "blank": "none"},
        "https://mail.example.com/u/tok",
    )
    assert values == {
        "contact.email": "ann@example.com",
        "EMAIL": "ann@example.com",
        "contact.first_name": "Ann",
        "FIRST_NAME": "Ann",
        "contact.plan": "pro",
        "contact.seats": "3",
        "contact.company": "ACME",
        "contact.age": "0",
        "contact.blank": "none",
        "RESEND_UNSUBSCRIBE_URL": "https://mail.example.com/u/tok",
        "UNSUBSCRIBE_URL": "https://mail.example.com/u/tok",
    }


def test_contact_values_without_names_or_link() -> None:
    values = contact_values("a@b.com", "", None, {}, {}, None)
    assert values == {"contact.email": "a@b.com", "EMAIL": "a@b.com"}
    compiled = compile_placeholders("Hi {{{FIRST_NAME|there}}}{{{RESEND_UNSUBSCRIBE_URL}}}")
    assert compiled.render(values, escape_html=True) == "Hi there"
