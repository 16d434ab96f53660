"""`/contacts` (contract section 6.2), and the legacy audience-scoped `/audiences/{id}/contacts`.

A contact is named in a path by its id or its address (percent-decoded). Its `properties` are
typed by the team's contact properties; an address belongs to one contact of a team. Every
write commits with its `contact.*` webhook (`audiences.contacts`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast
from urllib.parse import unquote

import orjson
from quart import Blueprint, request

from postwire.api.audience_models import ContactObject, ContactSummary, DeletedContact
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import ListBody, Reference
from postwire.api.pagination import PageRequest, list_response, parse_page_request
from postwire.api.request_body import json_object
from postwire.api.store_pages import store_page_parked
from postwire.audiences.contact_rules import contact_changes
from postwire.audiences.contacts import (
    change_contact,
    contact_to_add,
    create_contact,
    duplicate_contact,
    remove_contact,
)
from postwire.audiences.records import require_segment_parked
from postwire.concurrency import in_order
from postwire.errors import ApiError, validation_error
from postwire.store.contact_properties import (
    ContactPropertyRecord,
    team_properties_parked,
    value_fits,
)
from postwire.store.contacts import (
    CONTACTS,
    ContactRecord,
    PropertyValue,
    find_contact,
    find_contact_parked,
    get_contact_parked,
)
from postwire.store.segments import SEGMENT_MEMBERS, members_prefix
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix

# Records of a page read at a time (its contacts, a contact's segments), round trips overlapping.
READS_AT_ONCE = 16


def contact_summary(contact: ContactRecord) -> ContactSummary:
    return {
        "id": contact.id,
        "email": contact.email,
        "first_name": contact.first_name,
        "last_name": contact.last_name,
        "created_at": contact.created_at,
        "unsubscribed": contact.unsubscribed,
    }


def contact_json(
    contact: ContactRecord, properties: dict[str, ContactPropertyRecord]
) -> ContactObject:
    """The contact with the property values it holds, each with its property's type and as
    text (the Rust SDK reads a string; a number is its JSON text). A value under a key whose
    property was deleted (or re-made with another type) is not shown."""
    shown = {
        key: {"value": property_text(value), "type": properties[key].type}
        for key, value in contact.properties.items()
        if key in properties and value_fits(properties[key], value)
    }
    return cast(
        ContactObject, {"object": "contact", **contact_summary(contact), "properties": shown}
    )


def property_text(value: PropertyValue) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


async def segment_contacts(
    spool: Spool, team_id: str, segment_id: str, page: PageRequest
) -> ListBody:
    """A page of the segment's members, newest contact first, read from its member rows (the
    contacts' reads overlapping)."""
    prefix = members_prefix(team_id, segment_id)
    rows, has_more = await store_page_parked(SEGMENT_MEMBERS, spool, prefix, page)
    contacts = await in_order(
        lambda contact_id: get_contact_parked(spool, team_id, contact_id),
        [contact_id for contact_id, _ in rows],
        at_once=READS_AT_ONCE,
    )
    data: list[dict[str, Any]] = [dict(contact_summary(c)) for c in contacts if c is not None]
    return list_response(data, has_more)


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("contacts", __name__)
    spool = ctx.spool

    def team() -> str:
        return current_caller().team_id

    async def audience(audience_id: str) -> str:
        return (await require_segment_parked(spool, team(), audience_id, "Audience")).id

    async def create(body: dict[str, Any], audience_id: str | None) -> Reference:
        team_id, now = team(), ctx.now()
        legacy = audience_id or body.get("audience_id")
        if legacy is not None and not isinstance(legacy, str):
            raise validation_error("The `audience_id` field must be a segment id.")
        record = contact_to_add(spool, team_id, body, now, first_segment=legacy)
        existing = find_contact(spool, team_id, record.email)
        if existing is not None and audience_id is not None:
            # Contacts once lived in one audience each: adding an address the team has to
            # another audience now adds that contact to it.
            if audience_id in existing.segment_ids:
                raise duplicate_contact(record.email)
            joined = await change_contact(
                spool,
                team_id,
                existing.id,
                lambda c: replace(c, segment_ids=[*c.segment_ids, audience_id]),
                now,
            )
            return {"object": "contact", "id": joined.id}
        written = await create_contact(spool, record, now)
        return {"object": "contact", "id": written.id}

    async def update(id_or_email: str, audience_id: str | None) -> Reference:
        body = await json_object()
        team_id = team()
        properties = await team_properties_parked(spool, team_id)
        changed = await change_contact(
            spool,
            team_id,
            unquote(id_or_email),
            lambda c: contact_changes(c, body, properties),
            ctx.now(),
            segment_id=audience_id,
        )
        return {"object": "contact", "id": changed.id}

    async def delete(id_or_email: str, audience_id: str | None) -> DeletedContact:
        removed = await remove_contact(
            spool, team(), unquote(id_or_email), ctx.now(), segment_id=audience_id
        )
        return {"object": "contact", "id": removed.id, "contact": removed.id, "deleted": True}

    async def get_one(id_or_email: str, audience_id: str | None) -> ContactObject:
        team_id = team()
        contact = await find_contact_parked(spool, team_id, unquote(id_or_email))
        if contact is None or (audience_id is not None and audience_id not in contact.segment_ids):
            raise ApiError(404, "not_found", "Contact not found")
        return contact_json(contact, await team_properties_parked(spool, team_id))

    @blueprint.post("/contacts")
    async def create_global() -> tuple[Reference, int]:
        return await create(await json_object(), None), 201

    @blueprint.get("/contacts")
    async def list_global() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        team_id = team()
        segment_id = request.args.get("segment_id") or request.args.get("audience_id")
        if segment_id:
            await require_segment_parked(spool, team_id, segment_id)
            return await segment_contacts(spool, team_id, segment_id, page)
        rows, has_more = await store_page_parked(CONTACTS, spool, team_prefix(team_id), page)
        return list_response([dict(contact_summary(c)) for _, c in rows], has_more)

    @blueprint.get("/contacts/<id_or_address:contact_id_or_email>")
    async def get_global(contact_id_or_email: str) -> ContactObject:
        return await get_one(contact_id_or_email, None)

    @blueprint.patch("/contacts/<id_or_address:contact_id_or_email>")
    async def update_global(contact_id_or_email: str) -> Reference:
        return await update(contact_id_or_email, None)

    @blueprint.delete("/contacts/<id_or_address:contact_id_or_email>")
    async def delete_global(contact_id_or_email: str) -> DeletedContact:
        return await delete(contact_id_or_email, None)

    legacy = "/audiences/<id:audience_id>/contacts"

    @blueprint.post(legacy)
    async def create_legacy(audience_id: str) -> tuple[Reference, int]:
        return await create(await json_object(), await audience(audience_id)), 201

    @blueprint.get(legacy)
    async def list_legacy(audience_id: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        return await segment_contacts(spool, team(), await audience(audience_id), page)

    @blueprint.get(legacy + "/<id_or_address:contact_id_or_email>")
    async def get_legacy(audience_id: str, contact_id_or_email: str) -> ContactObject:
        return await get_one(contact_id_or_email, await audience(audience_id))

    @blueprint.patch(legacy + "/<id_or_address:contact_id_or_email>")
    async def update_legacy(audience_id: str, contact_id_or_email: str) -> Reference:
        return await update(contact_id_or_email, await audience(audience_id))

    @blueprint.delete(legacy + "/<id_or_address:contact_id_or_email>")
    async def delete_legacy(audience_id: str, contact_id_or_email: str) -> DeletedContact:
        return await delete(contact_id_or_email, await audience(audience_id))

    return blueprint
