"""`/api-keys` (contract section 2): create, list, rename, delete."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import ApiKeySummary, CreatedApiKey, DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_object
from postwire.domains import store as domain_store
from postwire.errors import ApiError, validation_error
from postwire.store import accounts
from postwire.store.accounts import PERMISSIONS, ApiKeyRecord, Permission

MAX_NAME_LENGTH = 50


def key_name(body: dict[str, Any]) -> str:
    name = body.get("name")
    if name is None:
        raise ApiError(422, "missing_required_field", "Missing `name` field.")
    if not isinstance(name, str) or not name.strip():
        raise validation_error("The `name` field must be a non-empty string.")
    if len(name) > MAX_NAME_LENGTH:
        raise validation_error(f"The `name` field must be at most {MAX_NAME_LENGTH} characters.")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise validation_error("The `name` field must not contain control characters.")
    return name


def key_permission(body: dict[str, Any]) -> Permission:
    permission = body.get("permission", "full_access")
    for allowed in PERMISSIONS:
        if permission == allowed:
            return allowed
    raise validation_error("The `permission` field must be `full_access` or `sending_access`.")


def check_key_domain(ctx: ApiContext, team_id: str, domain_id: str) -> None:
    """A key may only be locked to one of its team's own domains."""
    if domain_store.load_domain(ctx.spool, team_id, domain_id) is None:
        raise validation_error(f"The `domain_id` {domain_id!r} is not one of your domains.")


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

    def team_key(key_id: str) -> ApiKeyRecord:
        key = accounts.get_api_key(ctx.spool, current_caller().team_id, key_id)
        if key is None:
            raise ApiError(404, "not_found", "API key not found")
        return key

    @blueprint.post("/api-keys")
    async def create_key() -> tuple[CreatedApiKey, int]:
        body = await json_object()
        name, permission = key_name(body), key_permission(body)
        domain_id = body.get("domain_id")
        if domain_id is not None and not isinstance(domain_id, str):
            raise validation_error("The `domain_id` field must be a string.")
        if domain_id is not None and permission == "sending_access":
            check_key_domain(ctx, current_caller().team_id, domain_id)
        key, token = await accounts.create_api_key(
            ctx.spool, current_caller().team_id, name, permission, domain_id, ctx.now()
        )
        return {"object": "api_key", "id": key.id, "token": token}, 201

    @blueprint.get("/api-keys")
    async def list_keys() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        keys = accounts.list_api_keys(ctx.spool, current_caller().team_id)
        window, has_more = page_of(keys, page, lambda key: key.id)
        return list_response([dict(key_summary(key)) for key in window], has_more)

    @blueprint.patch("/api-keys/<id:key_id>")
    async def rename_key(key_id: str) -> Reference:
        body = await json_object()
        key = team_key(key_id)
        await accounts.rename_api_key(ctx.spool, key, key_name(body))
        return {"object": "api_key", "id": key.id}

    @blueprint.delete("/api-keys/<id:key_id>")
    async def delete_key(key_id: str) -> DeletedReference:
        key = team_key(key_id)
        await accounts.delete_api_key(ctx.spool, key)
        return {"object": "api_key", "id": key.id, "deleted": True}

    return blueprint
