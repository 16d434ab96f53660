"""Reading JSON request bodies the way the SDKs send them."""

from __future__ import annotations

import json
from typing import Any

from quart import request

from postwire.errors import ApiError, validation_error


async def json_body() -> Any:
    """The parsed JSON body; None when there is none (Go and Node send an empty body with a JSON
    content type on GET and DELETE). Malformed JSON is a 400 in the contract's shape."""
    raw = await request.get_data(as_text=False)
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "validation_error", "The request body is not valid JSON.") from None


async def json_object() -> dict[str, Any]:
    """The body as a JSON object (an absent body counts as `{}`)."""
    body = await json_body()
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise validation_error("The request body must be a JSON object.")
    return body
