"""Triple-brace placeholders: parse a text once, render it for many recipients.

Grammar (docs/templates.md says the same for users):

    placeholder := "{{{" ws name ws [ "|" fallback ] "}}}"
    name        := word ( "." word )*          word := [A-Za-z0-9_]+
    fallback    := any characters but "{", "}", CR and LF (surrounding blanks trimmed)
    ws          := spaces and tabs

Anything else, a `{{{` that never closes or holds something that is not a name included, is
left as text, untouched. Names are case-sensitive. A placeholder takes its value from the
mapping given to `render`; when the mapping lacks the name (or holds an empty string) the
placeholder's own fallback is used, else nothing.

Values are escaped for HTML when rendering HTML (`&`, `<`, `>`, `"`, `'`), so a URL stays a
working URL inside an attribute (`&` becomes `&amp;`, which the attribute decodes back), and
are left as they are in text and subjects. A fallback written in the placeholder is part of
the author's source, so it is inserted as written.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

PLACEHOLDER = re.compile(
    r"\{\{\{[ \t]*(?P<name>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)[ \t]*"
    r"(?:\|(?P<fallback>[^{}\r\n]*))?\}\}\}"
)

# Legacy upper-case names and the current `contact.*` names filled from a contact.
UNSUBSCRIBE_URL_NAMES = ("RESEND_UNSUBSCRIBE_URL", "UNSUBSCRIBE_URL")


@dataclass(frozen=True, slots=True)
class Slot:
    index: int  # position in the compiled parts
    name: str
    fallback: str | None  # None: the placeholder gave none


class Compiled:
    """A text split once into literal parts and placeholder slots."""

    __slots__ = ("_parts", "_slots", "names", "names_without_fallback", "source")

    def __init__(self, source: str, parts: list[str], slots: tuple[Slot, ...]) -> None:
        self.source = source
        self._parts = parts
        self._slots = slots
        # Unique names in the order they first appear, so errors name the first one.
        self.names: tuple[str, ...] = tuple(dict.fromkeys(slot.name for slot in slots))
        self.names_without_fallback: tuple[str, ...] = tuple(
            dict.fromkeys(slot.name for slot in slots if slot.fallback is None)
        )

    def render(self, values: Mapping[str, str], *, escape_html: bool) -> str:
        if not self._slots:
            return self.source
        parts = self._parts.copy()
        for slot in self._slots:
            value = values.get(slot.name)
            if value:
                parts[slot.index] = html.escape(value) if escape_html else value
            elif slot.fallback is not None:
                parts[slot.index] = slot.fallback
        return "".join(parts)


def compile_placeholders(text: str) -> Compiled:
    parts: list[str] = []
    slots: list[Slot] = []
    position = 0
    for match in PLACEHOLDER.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        fallback = match.group("fallback")
        slots.append(
            Slot(len(parts), match.group("name"), None if fallback is None else fallback.strip())
        )
        parts.append("")  # filled by render; empty when nothing applies
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return Compiled(text, parts, tuple(slots))


def format_value(value: object) -> str:
    """A variable or property value as placed in a message: numbers without a trailing `.0`,
    booleans as `true`/`false`, objects and lists as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def contact_values(
    email: str,
    first_name: str | None,
    last_name: str | None,
    properties: Mapping[str, object],
    fallbacks: Mapping[str, object],
    unsubscribe_url: str | None,
) -> dict[str, str]:
    """The values a contact gives placeholders: `contact.email`, `contact.first_name`,
    `contact.last_name`, `contact.<property_key>` and the legacy `EMAIL`, `FIRST_NAME`,
    `LAST_NAME`, `RESEND_UNSUBSCRIBE_URL`. A property the contact lacks takes its
    `fallbacks` value (the contact property's fallback_value); a name left out here lets the
    placeholder's own fallback apply."""
    values: dict[str, str] = {}
    for key, fallback in fallbacks.items():
        text = format_value(fallback)
        if text:
            values[f"contact.{key}"] = text
    for key, value in properties.items():
        text = format_value(value)
        if text:
            values[f"contact.{key}"] = text
    values["contact.email"] = values["EMAIL"] = email
    if first_name:
        values["contact.first_name"] = values["FIRST_NAME"] = first_name
    if last_name:
        values["contact.last_name"] = values["LAST_NAME"] = last_name
    if unsubscribe_url:
        for name in UNSUBSCRIBE_URL_NAMES:
            values[name] = unsubscribe_url
    return values
