"""The values SDKs put on the wire, read as the contract means them, for every JSON body.

The request TypedDicts (`models.py` and its siblings) say what each route reads; `OPERATIONS`
ties them to the routes. `normalize_body` walks a parsed body along that declaration, so no
handler has to know how one SDK or another spells a value:

- An enum value (a `Literal` of strings) is matched whatever its case and stored in the
  contract's: the Java SDK sends some enums by their constant names (`"tls": "ENFORCED"`).
- A field declared `Annotated[str, BlankIsAbsent(...)]` (`request_rules`) given as `""` is
  a field not given: the Go SDK sends every string field it has no `omitempty` for, `""` when
  unset (`"subject": ""` beside a `template` that supplies the subject; `"name": ""` and
  `"html": ""` in a template update that changes neither).

Values of any other shape are left as they are, for the handlers' own checks to refuse.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

from postwire.api.openapi import OPERATIONS
from postwire.api.operation import Operation
from postwire.api.request_rules import BlankIsAbsent


def request_type_of(method: str, rule: str | None) -> tuple[type | None, bool]:
    """The TypedDict of the body the route serves (`rule` in the router's syntax, e.g.
    `/emails/<id:email_id>`), and whether the body is an array of them."""
    if rule is None:
        return None, False
    operation = _operations().get((method.lower(), _openapi_path(rule)))
    if operation is None:
        return None, False
    return operation.request, operation.request_array


def normalize_body(body: Any, request_type: type | None, *, array: bool = False) -> Any:
    """`body` with its enum values in the contract's case and its blank-is-absent fields
    dropped where blank (see the module's docstring). A bare array where an object with one
    array field is declared (the Python and Rust SDKs' form of `PATCH /contacts/{id}/topics`)
    is read as that field's value."""
    if request_type is None:
        return body
    if array:
        return (
            [_normalized(item, request_type) for item in body] if isinstance(body, list) else body
        )
    if not isinstance(body, list):
        return _normalized(body, request_type)
    arrays = [hint for hint in _hints(request_type).values() if get_origin(_bare(hint)) is list]
    return _normalized(body, _bare(arrays[0])) if len(arrays) == 1 else body


@functools.cache
def _operations() -> dict[tuple[str, str], Operation]:
    return {(op.method, op.path): op for op in OPERATIONS}


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _bare(hint: Any) -> Any:
    """The type under `NotRequired`, `Required` and `Annotated`."""
    while get_origin(hint) in (NotRequired, Required, Annotated):
        hint = get_args(hint)[0]
    return hint


def _blank_rule(hint: Any) -> BlankIsAbsent | None:
    while get_origin(hint) in (NotRequired, Required):
        hint = get_args(hint)[0]
    if get_origin(hint) is Annotated:
        return next((m for m in hint.__metadata__ if isinstance(m, BlankIsAbsent)), None)
    return None


@functools.cache
def _has_rules(hint: Any) -> bool:
    """Whether values of `hint` can hold anything to normalize: a walk skips the rest (an
    attachment's content, sent as an array of 40 million byte values, is never walked)."""
    if _blank_rule(hint) is not None:
        return True
    hint = _bare(hint)
    if get_origin(hint) is Literal:
        return True
    if typing.is_typeddict(hint):
        return any(_has_rules(field) for field in _hints(hint).values())
    return any(_has_rules(arg) for arg in get_args(hint))


def _normalized(value: Any, hint: Any) -> Any:
    if not _has_rules(hint):
        return value
    hint = _bare(hint)
    origin = get_origin(hint)
    if origin is Literal:
        return _canonical_case(value, get_args(hint))
    if origin in (Union, types.UnionType):
        for arm in get_args(hint):
            value = _normalized(value, arm)
        return value
    if origin is list and isinstance(value, list):
        (item,) = get_args(hint)
        return [_normalized(element, item) for element in value]
    if origin is dict and isinstance(value, dict):
        _, item = get_args(hint)
        return {key: _normalized(element, item) for key, element in value.items()}
    if typing.is_typeddict(hint) and isinstance(value, dict):
        return _normalized_object(value, _hints(hint))
    return value


def _normalized_object(value: dict[str, Any], hints: dict[str, Any]) -> dict[str, Any]:
    result = dict(value)
    for key, hint in hints.items():
        if key not in result:
            continue
        rule = _blank_rule(hint)
        if (
            rule is not None
            and result[key] == ""
            and (rule.when_given is None or value.get(rule.when_given) is not None)
        ):
            del result[key]
            continue
        result[key] = _normalized(result[key], hint)
    return result


def _canonical_case(value: Any, allowed: tuple[Any, ...]) -> Any:
    if not isinstance(value, str) or value in allowed:
        return value
    folded = value.casefold()
    return next(
        (choice for choice in allowed if isinstance(choice, str) and choice.casefold() == folded),
        value,
    )
