"""`/segments` and their deprecated name `/audiences` (contract section 6.1), a segment's
contacts, and `/contacts/{id}/segments`: which segments a contact is in.

A segment holds contacts added to it (by id, by address, at creation or by import); filters
that select contacts by their fields are not supported. Deleting a segment removes it at once;
its members are taken out of it after the answer, in the app's background tasks, and what a
stop interrupted is finished when the API starts again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal
from urllib.parse import unquote

from quart import Blueprint, current_app, request

from postwire.api.audience_models import (
    ContactSegmentAdded,
    ContactSegmentRemoved,
    CreatedSegment,
    SegmentObject,
    SegmentSummary,
)
from postwire.api.auth import current_caller
from postwire.api.contacts import READS_AT_ONCE, segment_contacts
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_object
from postwire.api.store_pages import store_page_parked
from postwire.audiences import segments as segment_writes
from postwire.audiences.contacts import (
    change_contact,
    contact_not_found,
    empty_deleted_segment,
    empty_deleted_segments,
)
from postwire.audiences.records import require_segment_parked
from postwire.concurrency import in_order
from postwire.store.contacts import find_contact_parked
from postwire.store.segments import SEGMENTS, SegmentRecord, get_segment_parked
from postwire.store.team_records import team_prefix

SegmentKind = Literal["segment", "audience"]


def segment_summary(segment: SegmentRecord) -> SegmentSummary:
    return {"id": segment.id, "name": segment.name, "created_at": segment.created_at}


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("segments", __name__)
    spool = ctx.spool

    def team() -> str:
        return current_caller().team_id

    def noun(kind: SegmentKind) -> str:
        return "Audience" if kind == "audience" else "Segment"

    async def create(kind: SegmentKind) -> tuple[CreatedSegment, int]:
        segment = await segment_writes.create_segment(spool, team(), await json_object(), ctx.now())
        return {"object": kind, "id": segment.id, "name": segment.name}, 201

    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        rows, has_more = await store_page_parked(SEGMENTS, spool, team_prefix(team()), page)
        return list_response([dict(segment_summary(s)) for _, s in rows], has_more)

    async def get_one(kind: SegmentKind, segment_id: str) -> SegmentObject:
        segment = await require_segment_parked(spool, team(), segment_id, noun(kind))
        return {
            "object": kind,
            "id": segment.id,
            "name": segment.name,
            "created_at": segment.created_at,
        }

    async def delete(kind: SegmentKind, segment_id: str) -> DeletedReference:
        segment = await segment_writes.remove_segment(spool, team(), segment_id, noun(kind))
        # Its members leave it after the answer: a segment may hold a million contacts.
        current_app.add_background_task(empty_deleted_segment, spool, segment, ctx.now())
        return {"object": kind, "id": segment.id, "deleted": True}

    @blueprint.before_app_serving
    async def resume_deletions() -> None:
        """Finish emptying segments whose deletion a stop interrupted."""
        current_app.add_background_task(empty_deleted_segments, spool, ctx.now())

    @blueprint.post("/segments")
    async def create_segment() -> tuple[CreatedSegment, int]:
        return await create("segment")

    @blueprint.post("/audiences")
    async def create_audience() -> tuple[CreatedSegment, int]:
        return await create("audience")

    @blueprint.get("/segments")
    async def list_segments() -> ListBody:
        return await list_all()

    @blueprint.get("/audiences")
    async def list_audiences() -> ListBody:
        return await list_all()

    @blueprint.get("/segments/<id:segment_id>")
    async def get_segment_route(segment_id: str) -> SegmentObject:
        return await get_one("segment", segment_id)

    @blueprint.get("/audiences/<id:audience_id>")
    async def get_audience(audience_id: str) -> SegmentObject:
        return await get_one("audience", audience_id)

    @blueprint.patch("/segments/<id:segment_id>")
    async def rename(segment_id: str) -> Reference:
        segment = await segment_writes.rename_segment(
            spool, team(), segment_id, await json_object()
        )
        return {"object": "segment", "id": segment.id}

    @blueprint.delete("/segments/<id:segment_id>")
    async def delete_segment_route(segment_id: str) -> DeletedReference:
        return await delete("segment", segment_id)

    @blueprint.delete("/audiences/<id:audience_id>")
    async def delete_audience(audience_id: str) -> DeletedReference:
        return await delete("audience", audience_id)

    @blueprint.get("/segments/<id:segment_id>/contacts")
    async def members(segment_id: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        team_id = team()
        await require_segment_parked(spool, team_id, segment_id)
        return await segment_contacts(spool, team_id, segment_id, page)

    contact_segments = "/contacts/<id_or_address:contact_id_or_email>/segments"

    @blueprint.get(contact_segments)  # also `.../segments/`, the Rust SDK's path
    async def segments_of_contact(contact_id_or_email: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        team_id = team()
        contact = await find_contact_parked(spool, team_id, unquote(contact_id_or_email))
        if contact is None:
            raise contact_not_found()
        found = await in_order(
            lambda segment_id: get_segment_parked(spool, team_id, segment_id),
            sorted(contact.segment_ids, reverse=True),
            at_once=READS_AT_ONCE,
        )
        window, has_more = page_of([s for s in found if s is not None], page, lambda s: s.id)
        data: list[dict[str, Any]] = [dict(segment_summary(s)) for s in window]
        return list_response(data, has_more)

    @blueprint.post(contact_segments + "/<id:segment_id>")
    async def join(contact_id_or_email: str, segment_id: str) -> tuple[ContactSegmentAdded, int]:
        team_id = team()
        await require_segment_parked(spool, team_id, segment_id)
        contact = await change_contact(
            spool,
            team_id,
            unquote(contact_id_or_email),
            lambda c: (
                c
                if segment_id in c.segment_ids
                else replace(c, segment_ids=[*c.segment_ids, segment_id])
            ),
            ctx.now(),
        )
        return {
            "object": "contact_segment",
            "id": segment_id,
            "contact_id": contact.id,
            "segment_id": segment_id,
        }, 201

    @blueprint.delete(contact_segments + "/<id:segment_id>")
    async def leave(contact_id_or_email: str, segment_id: str) -> ContactSegmentRemoved:
        team_id = team()
        await require_segment_parked(spool, team_id, segment_id)
        contact = await change_contact(
            spool,
            team_id,
            unquote(contact_id_or_email),
            lambda c: replace(c, segment_ids=[s for s in c.segment_ids if s != segment_id]),
            ctx.now(),
            segment_id=segment_id,
        )
        return {
            "object": "contact_segment",
            "id": segment_id,
            "contact_id": contact.id,
            "segment_id": segment_id,
            "deleted": True,
        }

    return blueprint
