"""`/contact-properties` (contract section 6.3): the typed keys a team's contacts may carry
values under, each with a fallback for contacts without one.

`key` and `type` are fixed at creation (contacts hold values of that type); only the fallback
changes. Deleting a property hides the values contacts hold under its key.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from quart import Blueprint, request

from postwire import _core
from postwire._core import WriteBatch
from postwire.api.audience_models import ContactPropertyObject
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, parse_page_request
from postwire.api.request_body import json_object
from postwire.api.resource_ids import is_resource_id
from postwire.api.store_pages import store_page
from postwire.audiences.contact_rules import (
    fallback_value,
    missing_field,
    property_key,
    property_type,
)
from postwire.errors import ApiError, validation_error
from postwire.store.accounts import contract_timestamp
from postwire.store.contact_properties import (
    CONTACT_PROPERTIES,
    MAX_PROPERTIES_PER_TEAM,
    ContactPropertyRecord,
    delete_property,
    get_property,
    properties_lock_key,
    put_property,
    team_properties,
)
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix

DEFAULT_PAGE = 20


def property_json(prop: ContactPropertyRecord) -> ContactPropertyObject:
    return cast(
        ContactPropertyObject,
        {
            "object": "contact_property",
            "id": prop.id,
            "key": prop.key,
            "type": prop.type,
            "fallback_value": prop.fallback_value,
            "created_at": prop.created_at,
        },
    )


def require_property(spool: Spool, team_id: str, property_id: str) -> ContactPropertyRecord:
    prop = get_property(spool, team_id, property_id) if is_resource_id(property_id) else None
    if prop is None:
        raise ApiError(404, "not_found", "Contact property not found")
    return prop


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("contact_properties", __name__)
    spool = ctx.spool

    def team() -> str:
        return current_caller().team_id

    @blueprint.post("/contact-properties")
    async def create() -> tuple[Reference, int]:
        body = await json_object()
        key = property_key(body.get("key"))
        kind = property_type(body.get("type"))
        fallback = fallback_value(body.get("fallback_value"), kind)
        team_id = team()
        # One team's creates in turn: the key is unique in the team.
        async with spool.record_lock(properties_lock_key(team_id)):
            existing = team_properties(spool, team_id)
            if key in existing:
                raise validation_error(f"A contact property with the key `{key}` already exists.")
            if len(existing) >= MAX_PROPERTIES_PER_TEAM:
                raise validation_error(
                    f"A team has at most {MAX_PROPERTIES_PER_TEAM} contact properties."
                )
            prop = ContactPropertyRecord(
                _core.new_id(), team_id, key, kind, fallback, contract_timestamp(ctx.now())
            )
            batch = WriteBatch()
            put_property(batch, prop)
            await spool.commit(batch)
        return {"object": "contact_property", "id": prop.id}, 201

    @blueprint.get("/contact-properties")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        rows, has_more = store_page(CONTACT_PROPERTIES, spool, team_prefix(team()), page)
        return list_response([dict(property_json(p)) for _, p in rows], has_more)

    @blueprint.get("/contact-properties/<id:property_id>")
    async def get_one(property_id: str) -> ContactPropertyObject:
        return property_json(require_property(spool, team(), property_id))

    @blueprint.patch("/contact-properties/<id:property_id>")
    async def update(property_id: str) -> Reference:
        body = await json_object()
        if "fallback_value" not in body:
            raise missing_field("fallback_value")
        team_id = team()
        async with spool.record_lock(properties_lock_key(team_id)):
            prop = require_property(spool, team_id, property_id)
            for fixed in ("key", "type"):
                if body.get(fixed) is not None and body[fixed] != getattr(prop, fixed):
                    raise validation_error(f"A contact property's `{fixed}` cannot be changed.")
            changed = replace(
                prop, fallback_value=fallback_value(body["fallback_value"], prop.type)
            )
            batch = WriteBatch()
            put_property(batch, changed)
            await spool.commit(batch)
        return {"object": "contact_property", "id": prop.id}

    @blueprint.delete("/contact-properties/<id:property_id>")
    async def delete(property_id: str) -> DeletedReference:
        team_id = team()
        async with spool.record_lock(properties_lock_key(team_id)):
            prop = require_property(spool, team_id, property_id)
            batch = WriteBatch()
            delete_property(batch, prop)
            await spool.commit(batch)
        return {"object": "contact_property", "id": prop.id, "deleted": True}

    return blueprint
