"""Reading JSON request bodies the way the SDKs send them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from quart import request

from postwire.api.wire_values import normalize_body, request_type_of
from postwire.errors import ApiError, validation_error

# No request of the contract nests deeper than a few levels; this leaves ample room, and keeps
# every later walk over a body (validation, hashing, storage) far from recursion limits.
MAX_NESTING = 32


async def json_body() -> Any:
    """The parsed JSON body, its values read as the contract means them (`wire_values`); None
    when there is none (Go and Node send an empty body with a JSON content type on GET and
    DELETE). Malformed JSON is a 400 in the contract's shape; arrays and objects nested deeper
    than `MAX_NESTING` a 422."""
    raw = await request.get_data(as_text=False)
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except RecursionError:
        # The stdlib decoder recurses once per level: it gives up near the interpreter's limit.
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "validation_error", "The request body is not valid JSON.") from None
    if nests_deeper_than(body, MAX_NESTING):
        raise _too_deep()
    rule = request.url_rule.rule if request.url_rule is not None else None
    request_type, array = request_type_of(request.method, rule)
    return normalize_body(body, request_type, array=array)


def nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects in `value` nest more than `limit` levels (a scalar is level 0,
    `[]` level 1). Level by level, without recursion; it stops at the first level past `limit`."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        nested: list[Any] = []
        for container in level:
            items = container.values() if isinstance(container, dict) else container
            nested += [item for item in items if isinstance(item, dict | list)]
        if not nested:
            return False
        level = nested
    return bool(level)


def _too_deep() -> ApiError:
    return validation_error(
        f"The request body nests arrays and objects more than {MAX_NESTING} levels deep."
    )


def require_a_change(body: Mapping[str, Any], fields: type) -> None:
    """422 `missing_required_field` unless `body` sets one of the fields of `fields` (an update
    body's TypedDict): an update naming nothing to change is a client's mistake, not a no-op.
    Other keys do not count (the SDKs repeat the resource's id in the body)."""
    names = list(fields.__annotations__)
    if not any(body.get(name) is not None for name in names):
        listed = ", ".join(f"`{name}`" for name in names)
        raise ApiError(422, "missing_required_field", f"Missing a field to change: {listed}.")


async def json_object() -> dict[str, Any]:
    """The body as a JSON object (an absent body counts as `{}`)."""
    body = await json_body()
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise validation_error("The request body must be a JSON object.")
    return body
