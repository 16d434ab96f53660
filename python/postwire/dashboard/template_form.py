"""The Templates pages' form, read into the REST API's body (so the same rules judge it) and
written back from a template.

Fields, as a person types them:

    name, alias, from, subject, html, text     text; an empty one is "not set" (an empty text
                                               part is generated from the HTML at send time)
    reply_to                                   addresses, one a line or separated by commas
    variables                                  one a line: `KEY`, `KEY = fallback` (a string),
                                               `KEY: number = 3`, `KEY: boolean = true`, ...
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from postwire.errors import validation_error
from postwire.store.templates import TemplateRecord

FIELDS: Final = ("name", "alias", "from", "subject", "reply_to", "html", "text", "variables")


def variables_from_lines(text: str) -> list[dict[str, Any]]:
    """The API's `variables` from lines `KEY[: type][ = fallback]`; a fallback of another
    type than `string` is read as JSON (`3`, `true`, `{"a": 1}`, `["x"]`)."""
    declared: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        head, has_fallback, fallback = line.partition("=")
        key, _, kind = head.partition(":")
        variable: dict[str, Any] = {"key": key.strip(), "type": kind.strip() or "string"}
        if has_fallback:
            value = fallback.strip()
            if variable["type"] != "string":
                try:
                    value = json.loads(value)
                except ValueError:
                    raise validation_error(
                        f"The fallback of {variable['key']} is not a {variable['type']} value "
                        "(write numbers as 3, booleans as true or false, objects and lists "
                        "as JSON)."
                    ) from None
            variable["fallback_value"] = value
        declared.append(variable)
    return declared


def variables_as_lines(variables: list[dict[str, Any]]) -> str:
    lines = []
    for variable in variables:
        line = variable["key"]
        if variable["type"] != "string":
            line += f": {variable['type']}"
        fallback = variable["fallback_value"]
        if fallback is not None:
            shown = fallback if variable["type"] == "string" else json.dumps(fallback)
            line += f" = {shown}"
        lines.append(line)
    return "\n".join(lines)


def body_from_form(form: Mapping[str, str]) -> dict[str, Any]:
    """The API's create or update body of the form: every field given, an empty one as None."""

    def given(name: str) -> str | None:
        return form.get(name, "").strip() or None

    addresses = [part.strip() for part in form.get("reply_to", "").replace("\n", ",").split(",")]
    return {
        "name": form.get("name", "").strip(),
        "alias": given("alias"),
        "from": given("from"),
        "subject": given("subject"),
        "reply_to": [address for address in addresses if address] or None,
        # The HTML and text are kept as typed: their spaces may matter.
        "html": form.get("html", ""),
        "text": form.get("text") or None,
        "variables": variables_from_lines(form.get("variables", "")),
    }


def form_of(record: TemplateRecord) -> dict[str, str]:
    """The form's values showing `record`'s working copy."""
    return {
        "name": record.name,
        "alias": record.alias or "",
        "from": record.sender or "",
        "subject": record.subject or "",
        "reply_to": ", ".join(record.reply_to or []),
        "html": record.html,
        "text": record.text or "",
        "variables": variables_as_lines(record.variables),
    }
