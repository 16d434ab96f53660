"""The fields of a template's create and update bodies: pure rules, 422 at the first problem."""

from __future__ import annotations

import uuid
from typing import Any

from postwire import _core
from postwire.compose.addresses import parse_mailbox
from postwire.compose.header_text import is_header_safe, is_unicode_text
from postwire.errors import ApiError, validation_error
from postwire.templates.variables import DeclaredVariable

MAX_NAME_LENGTH = 256
MAX_ALIAS_LENGTH = 100
MAX_REPLY_TO = 50
# Characters an alias may not hold: it travels in a URL path, which SDKs join unescaped.
_ALIAS_FORBIDDEN = set("/?#%\\")


def _looks_like_id(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def template_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise validation_error("The `name` field must be a non-empty string.")
    if len(value) > MAX_NAME_LENGTH:
        raise validation_error(f"The `name` field must be at most {MAX_NAME_LENGTH} characters.")
    return value


def template_alias(value: object) -> str | None:
    """An alias: 1 to 100 printable characters, none of `/ ? # % \\`, not shaped like an id
    (a path segment that looks like an id is read as one)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise validation_error("The `alias` field must be a non-empty string.")
    if len(value) > MAX_ALIAS_LENGTH:
        raise validation_error(f"The `alias` field must be at most {MAX_ALIAS_LENGTH} characters.")
    if not value.isprintable() or _ALIAS_FORBIDDEN & set(value) or value != value.strip():
        raise validation_error(
            "The `alias` field must be printable text without `/`, `?`, `#`, `%` or `\\` and "
            "without surrounding spaces."
        )
    if _looks_like_id(value):
        raise validation_error("The `alias` field must not look like a template id.")
    return value


def template_html(value: object, field: str = "html") -> str:
    if not isinstance(value, str):
        raise validation_error(f"The `{field}` field must be a string.")
    if "\0" in value or not is_unicode_text(value):
        raise validation_error(f"The `{field}` field must be valid Unicode text without NUL.")
    return value


def optional_text(value: object, field: str) -> str | None:
    return None if value is None else template_html(value, field)


def template_subject(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise validation_error("The `subject` field must be a string.")
    if any(char in value for char in "\r\n") or not is_header_safe(value):
        raise validation_error("The `subject` field must not contain line breaks or controls.")
    if not is_unicode_text(value):
        raise validation_error("The `subject` field must be valid Unicode text.")
    return value


def template_sender(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or parse_mailbox(value) is None:
        raise validation_error(
            "Invalid `from` field. The email address needs to follow the "
            "`email@example.com` or `Name <email@example.com>` format."
        )
    return value


def template_reply_to(value: object) -> list[str] | None:
    if value is None or value == []:
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
        raise validation_error("The `reply_to` field must be a string or an array of strings.")
    if len(values) > MAX_REPLY_TO:
        raise validation_error(f"The `reply_to` field can have at most {MAX_REPLY_TO} addresses.")
    if any(parse_mailbox(item) is None for item in values):
        raise validation_error(
            "Invalid `reply_to` field. The email address needs to follow the "
            "`email@example.com` or `Name <email@example.com>` format."
        )
    return list(values)


def variable_records(
    declared: list[DeclaredVariable], previous: list[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """Declarations as stored and served; a key declared before keeps its id and created_at,
    and its updated_at unless its type or fallback changed."""
    before = {variable["key"]: variable for variable in previous}
    records: list[dict[str, Any]] = []
    for variable in declared:
        old = before.get(variable.key)
        unchanged = old is not None and (old["type"], old["fallback_value"]) == (
            variable.type,
            variable.fallback_value,
        )
        records.append(
            {
                "id": _core.new_id() if old is None else old["id"],
                "key": variable.key,
                "type": variable.type,
                "fallback_value": variable.fallback_value,
                "created_at": now if old is None else old["created_at"],
                "updated_at": old["updated_at"] if old is not None and unchanged else now,
            }
        )
    return records


def required(body: dict[str, Any], field: str) -> object:
    value = body.get(field)
    if value is None or value == "":
        raise ApiError(422, "missing_required_field", f"Missing `{field}` field")
    return value
