"""`/api-keys` (contract section 2): create, list, rename, delete."""

from __future__ import annotations

from quart import Blueprint, request

from postwire.accounts.api_keys import create_team_api_key, find_api_key_parked, key_name
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import ApiKeySummary, CreatedApiKey, DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_object
from postwire.store import accounts
from postwire.store.accounts import ApiKeyRecord


def key_summary(key: ApiKeyRecord) -> ApiKeySummary:
    return {
        "id": key.id,
        "name": key.name,
        "created_at": key.created_at,
        "last_used_at": key.last_used_at,
        "permission": key.permission,
        "domain_id": key.domain_id,
    }


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("api_keys", __name__)

    async def team_key(key_id: str) -> ApiKeyRecord:
        return await find_api_key_parked(ctx.spool, current_caller().team_id, key_id)

    @blueprint.post("/api-keys")
    async def create_key() -> tuple[CreatedApiKey, int]:
        body = await json_object()
        key, token = await create_team_api_key(
            ctx.spool,
            current_caller().team_id,
            body.get("name"),
            body.get("permission", "full_access"),
            body.get("domain_id"),
            ctx.now(),
        )
        return {"object": "api_key", "id": key.id, "token": token}, 201

    @blueprint.get("/api-keys")
    async def list_keys() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        keys = await accounts.list_api_keys_parked(ctx.spool, current_caller().team_id)
        window, has_more = page_of(keys, page, lambda key: key.id)
        return list_response([dict(key_summary(key)) for key in window], has_more)

    @blueprint.patch("/api-keys/<id:key_id>")
    async def rename_key(key_id: str) -> Reference:
        body = await json_object()
        key = await team_key(key_id)
        await accounts.rename_api_key(ctx.spool, key, key_name(body.get("name")))
        return {"object": "api_key", "id": key.id}

    @blueprint.delete("/api-keys/<id:key_id>")
    async def delete_key(key_id: str) -> DeletedReference:
        key = await team_key(key_id)
        await accounts.delete_api_key(ctx.spool, key)
        return {"object": "api_key", "id": key.id, "deleted": True}

    return blueprint
