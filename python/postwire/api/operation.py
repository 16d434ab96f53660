"""One documented route of the REST API, as `openapi.py` turns it into the OpenAPI document."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str  # OpenAPI style: /emails/{email_id}
    summary: str
    response: type | None
    status: int = 200
    request: type | None = None
    list_item: type | None = None  # for list responses: the type of `data` items
    query: tuple[str, ...] = ()
    request_media: str = "application/json"
    request_array: bool = False  # the body is an array of `request` objects


PAGE_QUERY = ("limit", "after", "before")
