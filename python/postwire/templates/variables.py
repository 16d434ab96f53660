"""A template's declared variables, and the values a send gives them: pure rules.

A template declares variables (`{key, type, fallback_value}`); its html, text and subject use
them as placeholders. A send names the template and gives `variables`; a variable the
template declares or uses without a fallback must be given, else the send is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from postwire.errors import ApiError, validation_error
from postwire.templates.placeholders import Compiled, format_value

VARIABLE_TYPES = ("string", "number", "boolean", "object", "list")
# Names a template may not declare: they are filled from the contact (contract 3.2; the
# `contact.` placeholders fill from contacts too, so `contact` itself is reserved).
RESERVED_KEYS = frozenset(
    {"FIRST_NAME", "LAST_NAME", "EMAIL", "UNSUBSCRIBE_URL", "RESEND_UNSUBSCRIBE_URL", "contact",
     "this"}
)  # fmt: skip
MAX_VARIABLES = 50
MAX_KEY_LENGTH = 50
MAX_STRING_VALUE = 2000
MAX_NUMBER = 2**53 - 1

_KEY = re.compile(rf"[A-Za-z0-9_]{{1,{MAX_KEY_LENGTH}}}")


@dataclass(frozen=True, slots=True)
class DeclaredVariable:
    key: str
    type: str
    fallback_value: object  # None: no fallback; a value must be given


def is_contact_name(name: str) -> bool:
    """Placeholders a contact fills (broadcasts); a send through `/emails` has no contact, so
    they take their own fallback or stay empty, and are never required."""
    return name.startswith("contact.") or name in RESERVED_KEYS


def value_problem(value: object, kind: str) -> str | None:
    """Why `value` is not a value of variable type `kind`, or None when it is."""
    if kind == "string":
        if not isinstance(value, str):
            return "must be a string"
        if len(value) > MAX_STRING_VALUE:
            return f"must be at most {MAX_STRING_VALUE} characters"
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "must be a number"
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            return f"must be a number between -{MAX_NUMBER} and {MAX_NUMBER}"
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be a boolean"
    if kind == "object":
        return None if isinstance(value, dict) else "must be an object"
    return None if isinstance(value, list) else "must be an array"


def _key_problem(key: object) -> str | None:
    if not isinstance(key, str) or _KEY.fullmatch(key) is None:
        return f"must be 1 to {MAX_KEY_LENGTH} letters, digits or underscores"
    if key in RESERVED_KEYS:
        return "is reserved"
    return None


def parse_declared_variables(value: object) -> list[DeclaredVariable]:
    """The `variables` of a template's create or update body; 422 `validation_error` at the
    first problem. `null` is no variables."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise validation_error("The `variables` field must be an array.")
    if len(value) > MAX_VARIABLES:
        raise validation_error(f"A template can have at most {MAX_VARIABLES} variables.")
    declared: list[DeclaredVariable] = []
    for index, item in enumerate(value):
        where = f"`variables[{index}]`"
        if not isinstance(item, dict):
            raise validation_error(f"{where} must be an object with `key` and `type`.")
        key, kind = item.get("key"), item.get("type")
        if key is None or kind is None:
            raise ApiError(
                422, "missing_required_field", f"{where} must have a `key` and a `type`."
            )
        problem = _key_problem(key)
        if problem is not None:
            raise validation_error(f"The variable key `{key}` {problem}.")
        assert isinstance(key, str)
        if kind not in VARIABLE_TYPES:
            raise validation_error(
                f"The type of variable `{key}` must be one of {', '.join(VARIABLE_TYPES)}."
            )
        assert isinstance(kind, str)
        fallback = item.get("fallback_value")
        if fallback is not None:
            problem = value_problem(fallback, kind)
            if problem is not None:
                raise validation_error(f"The fallback_value of variable `{key}` {problem}.")
        elif kind == "object":
            raise validation_error(f"Variable `{key}` of type object needs a fallback_value.")
        if any(other.key == key for other in declared):
            raise validation_error(f"The variable key `{key}` is declared twice.")
        declared.append(DeclaredVariable(key, kind, fallback))
    return declared


def parse_send_variables(
    value: object, declared: Mapping[str, DeclaredVariable]
) -> dict[str, object]:
    """The `template.variables` of a send: an object whose keys follow the key grammar and
    whose values are a string of at most 2000 characters or a number within ±(2^53-1), or, for
    a declared variable, a value of its declared type."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise validation_error("The `template.variables` field must be an object.")
    for key, given in value.items():
        problem = _key_problem(key)
        if problem is not None:
            raise validation_error(f"The template variable `{key}` {problem}.")
        variable = declared.get(key)
        if variable is not None:
            problem = value_problem(given, variable.type)
        elif isinstance(given, str):
            problem = value_problem(given, "string")
        elif isinstance(given, int | float) and not isinstance(given, bool):
            problem = value_problem(given, "number")
        else:
            problem = "must be a string or a number"
        if problem is not None:
            raise validation_error(f"The template variable `{key}` {problem}.")
    return value


def missing_variable(
    declared: Sequence[DeclaredVariable],
    texts: Iterable[Compiled],
    given: Mapping[str, object],
) -> str | None:
    """The first variable that must be given and is not: declared without a fallback, or used
    by a placeholder that has no fallback of its own and is not declared with one."""
    with_fallback = {v.key for v in declared if v.fallback_value is not None}
    for variable in declared:
        if variable.fallback_value is None and variable.key not in given:
            return variable.key
    for compiled in texts:
        for name in compiled.names_without_fallback:
            if name not in given and name not in with_fallback and not is_contact_name(name):
                return name
    return None


def render_values(
    declared: Sequence[DeclaredVariable], given: Mapping[str, object]
) -> dict[str, str]:
    """Placeholder values: each declared fallback, overridden by what the send gives."""
    values = {
        v.key: format_value(v.fallback_value) for v in declared if v.fallback_value is not None
    }
    values.update((key, format_value(value)) for key, value in given.items())
    return values
