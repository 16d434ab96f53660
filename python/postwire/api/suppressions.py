"""`/suppressions`: the team's addresses that mail is no longer sent to.

Hard bounces (and, later, complaints) add addresses; an operator may add or remove them, one
at a time or up to 100 in one call (`/suppressions/batch/add`, `/batch/remove`). A path
identifier is an id or an email address (the Python SDK percent-encodes the latter).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from quart import Blueprint, request

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import (
    AddedSuppressions,
    DeletedReference,
    ListBody,
    RemovedSuppressions,
    SuppressionObject,
)
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_object
from postwire.errors import ApiError
from postwire.store.deliveries import SuppressionRecord
from postwire.suppressions import (
    add_suppression,
    add_suppressions,
    find_suppression,
    remove_suppression,
    remove_suppressions,
    team_suppressions,
)


def suppression_json(record: SuppressionRecord) -> SuppressionObject:
    created = datetime.fromtimestamp(record.created_at_ms / 1000, UTC)
    return {
        "object": "suppression",
        "id": record.id,
        "email": record.email,
        "origin": record.origin,
        "source_id": record.source_id,
        "created_at": created.strftime("%Y-%m-%d %H:%M:%S.%f+00"),
    }


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("suppressions", __name__)

    def find(id_or_email: str) -> SuppressionRecord:
        return find_suppression(ctx.spool, current_caller().team_id, unquote(id_or_email))

    @blueprint.post("/suppressions")
    async def add() -> tuple[SuppressionObject, int]:
        body = await json_object()
        email = body.get("email")
        if not isinstance(email, str):
            raise ApiError(422, "missing_required_field", "Missing `email` field.")
        record = await add_suppression(ctx.spool, current_caller().team_id, email, ctx.now_ms())
        return suppression_json(record), 201

    @blueprint.post("/suppressions/batch/add")
    async def add_batch() -> tuple[AddedSuppressions, int]:
        body = await json_object()
        records = await add_suppressions(
            ctx.spool, current_caller().team_id, body.get("emails"), ctx.now_ms()
        )
        return {"data": [{"object": "suppression", "id": record.id} for record in records]}, 201

    @blueprint.post("/suppressions/batch/remove")
    async def remove_batch() -> RemovedSuppressions:
        body = await json_object()
        records = await remove_suppressions(ctx.spool, current_caller().team_id, body)
        return {
            "data": [
                {"object": "suppression", "id": record.id, "deleted": True} for record in records
            ]
        }

    @blueprint.get("/suppressions")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        origin = request.args.get("origin")
        records = team_suppressions(ctx.spool, current_caller().team_id, origin=origin)
        window, has_more = page_of(records, page, lambda record: record.id)
        data: list[dict[str, Any]] = [dict(suppression_json(record)) for record in window]
        return list_response(data, has_more)

    @blueprint.get("/suppressions/<id_or_address:id_or_email>")
    async def get_one(id_or_email: str) -> SuppressionObject:
        return suppression_json(find(id_or_email))

    @blueprint.delete("/suppressions/<id_or_address:id_or_email>")
    async def remove(id_or_email: str) -> DeletedReference:
        record = find(id_or_email)
        await remove_suppression(ctx.spool, current_caller().team_id, record)
        return {"object": "suppression", "id": record.id, "deleted": True}

    return blueprint
