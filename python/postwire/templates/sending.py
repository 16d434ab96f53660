"""A send that names a template (`"template": {"id", "variables"}`): the body it stands for.

The template's published version gives html, text, subject, from and reply_to; the send's
own `from`, `subject` and `reply_to` override the template's; `html`, `text` and `react`
cannot be given with a template. Pure: the caller looks the template up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from postwire.errors import ApiError, validation_error
from postwire.templates.placeholders import compile_placeholders
from postwire.templates.variables import (
    DeclaredVariable,
    missing_variable,
    parse_send_variables,
    render_values,
)

CONTENT_FIELDS = ("html", "text", "react")
TEMPLATE_NOT_FOUND = "Template not found"


@dataclass(frozen=True, slots=True)
class TemplateReference:
    id_or_alias: str
    variables: object  # as sent; checked against the template's declarations


@dataclass(frozen=True, slots=True)
class TemplateContent:
    """What a published version sends."""

    template_id: str
    sender: str | None
    subject: str | None
    reply_to: list[str] | None
    html: str
    text: str | None  # None: generated from html; "": none
    variables: Sequence[Mapping[str, Any]]  # stored declarations: key, type, fallback_value


# Finds the caller's published template by id or alias; None when there is none.
TemplateLookup = Callable[[str], TemplateContent | None]


def parse_template_field(body: Mapping[str, object]) -> TemplateReference:
    """The send body's `template`, refused with html, text or react beside it."""
    given = [field for field in CONTENT_FIELDS if body.get(field) is not None]
    if given:
        fields = ", ".join(f"`{field}`" for field in given)
        raise validation_error(f"The {fields} field cannot be used with `template`.")
    value = body.get("template")
    if not isinstance(value, dict):
        raise validation_error("The `template` field must be an object with an `id`.")
    template_id = value.get("id")
    if template_id is None or template_id == "":
        raise ApiError(422, "missing_required_field", "Missing `template.id` field")
    if not isinstance(template_id, str):
        raise validation_error("The `template.id` field must be a string.")
    return TemplateReference(template_id, value.get("variables"))


def template_not_found() -> ApiError:
    return ApiError(404, "not_found", TEMPLATE_NOT_FOUND)


def declared_variables(stored: Sequence[Mapping[str, Any]]) -> list[DeclaredVariable]:
    return [DeclaredVariable(v["key"], v["type"], v.get("fallback_value")) for v in stored]


def templated_body(
    body: Mapping[str, object], content: TemplateContent, variables: object
) -> dict[str, object]:
    """`body` with the template rendered in: html, text and subject from the template with
    `variables` placed (HTML-escaped in html), from/subject/reply_to defaulted from it."""
    declared = declared_variables(content.variables)
    given = parse_send_variables(variables, {v.key: v for v in declared})
    html = compile_placeholders(content.html)
    text = None if content.text is None else compile_placeholders(content.text)
    subject = None if content.subject is None else compile_placeholders(content.subject)
    texts = [compiled for compiled in (subject, html, text) if compiled is not None]
    missing = missing_variable(declared, texts, given)
    if missing is not None:
        raise validation_error(f"Missing value for template variable `{missing}`.")
    values = render_values(declared, given)
    merged = {key: value for key, value in body.items() if key not in ("template", "react")}
    merged["html"] = html.render(values, escape_html=True)
    if text is not None:
        merged["text"] = text.render(values, escape_html=False)
    if body.get("subject") is None and subject is not None:
        merged["subject"] = subject.render(values, escape_html=False)
    if not body.get("from") and content.sender is not None:
        merged["from"] = content.sender
    if body.get("reply_to") is None and body.get("replyTo") is None and content.reply_to:
        merged["reply_to"] = content.reply_to
    return merged
