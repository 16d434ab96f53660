"""`/suppressions`: the team's addresses that mail is no longer sent to.

Hard bounces (and, later, complaints) add addresses; an operator may add or remove them. A
path identifier is an id or an email address (the Python SDK percent-encodes the latter).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from quart import Blueprint, request

from postwire._core import WriteBatch
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, ListBody, SuppressionObject
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_object
from postwire.compose.addresses import parse_mailbox
from postwire.errors import ApiError, validation_error
from postwire.store.deliveries import (
    SUPPRESSIONS,
    SuppressionRecord,
    list_suppressions,
    new_suppression,
    suppression_key,
)

ORIGINS = ("bounce", "complaint", "manual")


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
        team = current_caller().team_id
        wanted = unquote(id_or_email)
        if "@" in wanted:
            record = SUPPRESSIONS.get(ctx.spool, suppression_key(team, wanted))
        else:
            record = next((r for r in list_suppressions(ctx.spool, team) if r.id == wanted), None)
        if record is None:
            raise ApiError(404, "not_found", "Suppression not found")
        return record

    @blueprint.post("/suppressions")
    async def add() -> tuple[SuppressionObject, int]:
        body = await json_object()
        email = body.get("email")
        if not isinstance(email, str):
            raise ApiError(422, "missing_required_field", "Missing `email` field.")
        mailbox = parse_mailbox(email)
        if mailbox is None or mailbox[0] is not None:
            raise validation_error("The `email` field must be an email address.")
        team = current_caller().team_id
        key = suppression_key(team, mailbox[1])
        record = SUPPRESSIONS.get(ctx.spool, key)
        if record is None:
            record = new_suppression(mailbox[1], "manual", ctx.now_ms())
            batch = WriteBatch()
            SUPPRESSIONS.put(batch, key, record)
            await ctx.spool.commit(batch)
        return suppression_json(record), 201

    @blueprint.get("/suppressions")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        origin = request.args.get("origin")
        if origin is not None and origin not in ORIGINS:
            raise validation_error("The `origin` must be `bounce`, `complaint` or `manual`.")
        records = [
            record
            for record in reversed(list_suppressions(ctx.spool, current_caller().team_id))
            if origin is None or record.origin == origin
        ]
        records.sort(key=lambda record: record.created_at_ms, reverse=True)
        window, has_more = page_of(records, page, lambda record: record.id)
        data: list[dict[str, Any]] = [dict(suppression_json(record)) for record in window]
        return list_response(data, has_more)

    @blueprint.get("/suppressions/<id_or_address:id_or_email>")
    async def get_one(id_or_email: str) -> SuppressionObject:
        return suppression_json(find(id_or_email))

    @blueprint.delete("/suppressions/<id_or_address:id_or_email>")
    async def remove(id_or_email: str) -> DeletedReference:
        record = find(id_or_email)
        batch = WriteBatch()
        SUPPRESSIONS.delete(batch, suppression_key(current_caller().team_id, record.email))
        await ctx.spool.commit(batch)
        return {"object": "suppression", "id": record.id, "deleted": True}

    return blueprint
