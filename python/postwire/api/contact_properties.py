"""`/contact-properties` (contract section 6.3): the typed keys a team's contacts may carry
values under, each with a fallback for contacts without one.

`key` and `type` are fixed at creation (contacts hold values of that type); only the fallback
changes. Deleting a property hides the values contacts hold under its key.
"""

from __future__ import annotations

from typing import cast

from quart import Blueprint, request

from postwire.api.audience_models import ContactPropertyObject
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, parse_page_request
from postwire.api.request_body import json_object
from postwire.api.store_pages import store_page_parked
from postwire.audiences.properties import change_fallback, create_property, remove_property
from postwire.audiences.records import require_property_parked
from postwire.store.contact_properties import (
    CONTACT_PROPERTIES,
    ContactPropertyRecord,
)
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


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("contact_properties", __name__)
    spool = ctx.spool

    def team() -> str:
        return current_caller().team_id

    @blueprint.post("/contact-properties")
    async def create() -> tuple[Reference, int]:
        prop = await create_property(spool, team(), await json_object(), ctx.now())
        return {"object": "contact_property", "id": prop.id}, 201

    @blueprint.get("/contact-properties")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        rows, has_more = await store_page_parked(
            CONTACT_PROPERTIES, spool, team_prefix(team()), page
        )
        return list_response([dict(property_json(p)) for _, p in rows], has_more)

    @blueprint.get("/contact-properties/<id:property_id>")
    async def get_one(property_id: str) -> ContactPropertyObject:
        return property_json(await require_property_parked(spool, team(), property_id))

    @blueprint.patch("/contact-properties/<id:property_id>")
    async def update(property_id: str) -> Reference:
        prop = await change_fallback(spool, team(), property_id, await json_object())
        return {"object": "contact_property", "id": prop.id}

    @blueprint.delete("/contact-properties/<id:property_id>")
    async def delete(property_id: str) -> DeletedReference:
        prop = await remove_property(spool, team(), property_id)
        return {"object": "contact_property", "id": prop.id, "deleted": True}

    return blueprint
