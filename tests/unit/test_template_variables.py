"""Template variables and sends that name a template: declarations, given values, what must
be given, and the body a template stands for."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from postwire.errors import ApiError
from postwire.templates.placeholders import compile_placeholders
from postwire.templates.sending import (
    TemplateContent,
    parse_template_field,
    templated_body,
)
from postwire.templates.variables import (
    DeclaredVariable,
    missing_variable,
    parse_declared_variables,
    parse_send_variables,
    value_problem,
)


@pytest.mark.parametrize(
    ("value", "kind", "problem"),
    [
        ("x", "string", None),
        ("x" * 2000, "string", None),
        ("x" * 2001, "string", "must be at most 2000 characters"),
        (1, "string", "must be a string"),
        (0, "number", None),
        (-(2**53 - 1), "number", None),
        (2**53, "number", "must be a number between -9007199254740991 and 9007199254740991"),
        (1.5, "number", None),
        (float("inf"), "number", "must be a number between -9007199254740991 and 9007199254740991"),
        (True, "number", "must be a number"),
        ("1", "number", "must be a number"),
        (False, "boolean", None),
        (0, "boolean", "must be a boolean"),
        ({}, "object", None),
        ([], "object", "must be an object"),
        ([1], "list", None),
        ("a", "list", "must be an array"),
    ],
)
def test_value_problem(value: object, kind: str, problem: str | None) -> None:
    assert value_problem(value, kind) == problem


def test_parse_declared_variables() -> None:
    assert parse_declared_variables(None) == []
    assert parse_declared_variables(
        [
            {"key": "PRODUCT", "type": "string", "fallback_value": "item"},
            {"key": "price_2", "type": "number"},
            {"key": "SHOW", "type": "boolean", "fallback_value": False},
            {"key": "ITEMS", "type": "list", "fallback_value": [1]},
            {"key": "ADDRESS", "type": "object", "fallback_value": {"city": "Oslo"}},
        ]
    ) == [
        DeclaredVariable("PRODUCT", "string", "item"),
        DeclaredVariable("price_2", "number", None),
        DeclaredVariable("SHOW", "boolean", False),
        DeclaredVariable("ITEMS", "list", [1]),
        DeclaredVariable("ADDRESS", "object", {"city": "Oslo"}),
    ]


@pytest.mark.parametrize(
    ("value", "name", "text"),
    [
        ({}, "validation_error", "must be an array"),
        ([1], "validation_error", "must be an object"),
        ([{"key": "A"}], "missing_required_field", "`key` and a `type`"),
        ([{"key": "", "type": "string"}], "validation_error", "letters, digits"),
        ([{"key": "A" * 51, "type": "string"}], "validation_error", "letters, digits"),
        ([{"key": "a.b", "type": "string"}], "validation_error", "letters, digits"),
        ([{"key": "EMAIL", "type": "string"}], "validation_error", "reserved"),
        ([{"key": "contact", "type": "string"}], "validation_error", "reserved"),
        ([{"key": "A", "type": "date"}], "validation_error", "must be one of"),
        ([{"key": "A", "type": "string", "fallback_value": 1}], "validation_error", "string"),
        ([{"key": "A", "type": "object"}], "validation_error", "needs a fallback_value"),
        ([{"key": "A", "type": "string"}] * 2, "validation_error", "declared twice"),
        ([{"key": f"K{i}", "type": "string"} for i in range(51)], "validation_error", "at most 50"),
    ],
)
def test_parse_declared_variables_refuses(value: object, name: str, text: str) -> None:
    with pytest.raises(ApiError) as raised:
        parse_declared_variables(value)
    assert (raised.value.status, raised.value.name) == (422, name)
    assert text in raised.value.message


DECLARED = {
    "PRICE": DeclaredVariable("PRICE", "number", None),
    "SHOW": DeclaredVariable("SHOW", "boolean", True),
}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, None),
        ({"PRICE": 5, "NAME": "Ann", "N": 2.5, "SHOW": False}, None),
        ([], "must be an object"),
        ({"PRICE": "5"}, "`PRICE` must be a number"),
        ({"SHOW": 1}, "`SHOW` must be a boolean"),
        ({"X": True}, "`X` must be a string or a number"),
        ({"X": None}, "`X` must be a string or a number"),
        ({"X": {"a": 1}}, "`X` must be a string or a number"),
        ({"X": "y" * 2001}, "`X` must be at most 2000"),
        ({"X": -(2**53)}, "`X` must be a number between"),
        ({"FIRST_NAME": "Ann"}, "`FIRST_NAME` is reserved"),
        ({"bad-key": "x"}, "`bad-key` must be 1 to 50"),
    ],
)
def test_parse_send_variables(value: object, problem: str | None) -> None:
    if problem is None:
        assert parse_send_variables(value, DECLARED) == (value or {})
        return
    with pytest.raises(ApiError) as raised:
        parse_send_variables(value, DECLARED)
    assert raised.value.status == 422 and problem in raised.value.message


@pytest.mark.parametrize(
    ("declared", "text", "given", "missing"),
    [
        ([], "{{{A}}}", {}, "A"),
        ([], "{{{A}}}", {"A": ""}, None),
        ([], "{{{A|x}}}", {}, None),
        ([DeclaredVariable("A", "string", "x")], "{{{A}}}", {}, None),
        ([DeclaredVariable("A", "string", None)], "no placeholder", {}, "A"),
        ([DeclaredVariable("A", "string", None)], "{{{A|inline}}}", {}, "A"),
        ([], "{{{contact.first_name}}} {{{FIRST_NAME}}} {{{RESEND_UNSUBSCRIBE_URL}}}", {}, None),
        ([], "{{{B}}} {{{A}}}", {}, "B"),
    ],
)
def test_missing_variable(
    declared: list[DeclaredVariable], text: str, given: dict[str, object], missing: str | None
) -> None:
    assert missing_variable(declared, [compile_placeholders(text)], given) == missing


CONTENT = TemplateContent(
    template_id="t1",
    sender="Shop <shop@example.com>",
    subject="Your {{{PRODUCT}}}",
    reply_to=["help@example.com"],
    html="<p>{{{PRODUCT}}} & {{{PRICE}}} {{{contact.first_name|friend}}}</p>",
    text=None,
    variables=[
        {"id": "v1", "key": "PRODUCT", "type": "string", "fallback_value": "item"},
        {"id": "v2", "key": "PRICE", "type": "number", "fallback_value": None},
    ],
)


def test_templated_body_defaults_and_renders() -> None:
    body: dict[str, Any] = {"to": "a@example.org", "template": {"id": "t1"}, "tags": []}
    assert templated_body(body, CONTENT, {"PRICE": 2.0, "PRODUCT": "<b>"}) == {
        "to": "a@example.org",
        "tags": [],
        "html": "<p>&lt;b&gt; & 2 friend</p>",
        "subject": "Your <b>",
        "from": "Shop <shop@example.com>",
        "reply_to": ["help@example.com"],
    }


def test_templated_body_keeps_what_the_send_gives() -> None:
    body: dict[str, Any] = {
        "from": "Me <me@example.com>",
        "subject": "Mine",
        "replyTo": "me@example.com",
        "template": {"id": "t1"},
    }
    merged = templated_body(body, CONTENT, {"PRICE": 1})
    assert (merged["from"], merged["subject"], merged["replyTo"]) == (
        "Me <me@example.com>",
        "Mine",
        "me@example.com",
    )
    assert "reply_to" not in merged and "template" not in merged
    # An empty text turns the generated text part off, as in a send without a template.
    assert templated_body({}, replace(CONTENT, text=""), {"PRICE": 1})["text"] == ""


def test_templated_body_refuses_a_missing_variable() -> None:
    with pytest.raises(ApiError) as raised:
        templated_body({}, CONTENT, {})
    assert raised.value.status == 422
    assert raised.value.message == "Missing value for template variable `PRICE`."


@pytest.mark.parametrize(
    ("body", "status", "name", "text"),
    [
        ({"template": {"id": "a", "variables": {"X": 1}}}, 0, "", ""),
        ({"template": {"id": "a"}, "html": "<p/>"}, 422, "validation_error", "`html`"),
        ({"template": {"id": "a"}, "text": "", "react": "x"}, 422, "validation_error", "`react`"),
        ({"template": {}}, 422, "missing_required_field", "template.id"),
        ({"template": {"id": ""}}, 422, "missing_required_field", "template.id"),
        ({"template": {"id": 5}}, 422, "validation_error", "must be a string"),
        ({"template": []}, 422, "validation_error", "must be an object"),
    ],
)
def test_parse_template_field(body: dict[str, Any], status: int, name: str, text: str) -> None:
    if not status:
        reference = parse_template_field(body)
        assert (reference.id_or_alias, reference.variables) == ("a", {"X": 1})
        return
    with pytest.raises(ApiError) as raised:
        parse_template_field(body)
    assert (raised.value.status, raised.value.name) == (status, name)
    assert text in raised.value.message
