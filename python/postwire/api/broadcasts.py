"""Routes of `/broadcasts` (contract section 7): drafts, sending, canceling, and what became
of each recipient.

The changes are `broadcasts.drafts`' (shared with the dashboard's pages); this module reads
the bodies and shapes the answers.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

from postwire.api.auth import current_caller
from postwire.api.broadcast_body import (
    broadcast_fields,
    names_a_change,
    scheduled_at_of,
    send_flag,
)
from postwire.api.broadcast_models import (
    BroadcastObject,
    BroadcastRecipient,
    BroadcastSummary,
    ClickedLinkObject,
)
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, IdOnly, ListBody, Reference
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_object
from postwire.api.scheduling import parse_scheduled_at
from postwire.broadcasts.drafts import BroadcastDrafts, Schedule, send_now
from postwire.errors import ApiError, validation_error
from postwire.store.broadcasts import (
    BOUNCE_TYPES,
    BROADCASTS,
    RECIPIENT_TYPES,
    BroadcastRecord,
    RecipientRow,
    broadcast_counts,
    broadcasts_prefix,
    clicked_links,
    link_counts,
    recipient_rows_page,
)
from postwire.store.contacts import find_contact
from postwire.store.pages import newest_first_page

RECIPIENTS_PAGE = 20


def broadcast_json(record: BroadcastRecord, counts: dict[str, int]) -> BroadcastObject:
    return {
        "object": "broadcast",
        "id": record.id,
        "name": record.name,
        "audience_id": record.segment_id,
        "segment_id": record.segment_id,
        "from": record.sender,
        "subject": record.subject,
        "reply_to": record.reply_to or None,
        "preview_text": record.preview_text,
        "status": record.status,  # type: ignore[typeddict-item]
        "created_at": record.created_at,
        "scheduled_at": record.scheduled_at,
        "sent_at": record.sent_at,
        "html": record.html,
        "text": record.text,
        "topic_id": record.topic_id,
        "counts": counts,  # type: ignore[typeddict-item]
    }


def broadcast_summary(record: BroadcastRecord) -> BroadcastSummary:
    return {
        "id": record.id,
        "name": record.name,
        "audience_id": record.segment_id,
        "segment_id": record.segment_id,
        "status": record.status,  # type: ignore[typeddict-item]
        "created_at": record.created_at,
        "scheduled_at": record.scheduled_at,
        "sent_at": record.sent_at,
        "topic_id": record.topic_id,
    }


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("broadcasts", __name__)
    spool = ctx.spool
    drafts = BroadcastDrafts(spool, ctx.acceptor)

    def team() -> str:
        return current_caller().team_id

    def find(broadcast_id: str) -> BroadcastRecord:
        return drafts.find(team(), broadcast_id)

    def schedule_of(scheduled: str | None) -> Schedule:
        if scheduled is None:
            return send_now
        return lambda now: parse_scheduled_at(scheduled, now)

    @blueprint.post("/broadcasts")
    async def create() -> tuple[Reference, int]:
        body = await json_object()
        fields = broadcast_fields(body, creating=True)
        send, scheduled = send_flag(body)
        record = await drafts.create(
            team(), fields, ctx.now(), send=send, schedule=schedule_of(scheduled),
            key=current_caller().key,
        )  # fmt: skip
        return {"object": "broadcast", "id": record.id}, 201

    @blueprint.get("/broadcasts")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        rows, has_more = newest_first_page(
            BROADCASTS, spool, broadcasts_prefix(team()),
            after=page.after, before=page.before, limit=page.limit,
        )  # fmt: skip
        return list_response([dict(broadcast_summary(record)) for _, record in rows], has_more)

    @blueprint.get("/broadcasts/<id:broadcast_id>")
    async def get_one(broadcast_id: str) -> BroadcastObject:
        record = find(broadcast_id)
        return broadcast_json(record, broadcast_counts(spool, record.team_id, record.id))

    @blueprint.patch("/broadcasts/<id:broadcast_id>")
    async def update(broadcast_id: str) -> Reference:
        body = await json_object()
        fields = broadcast_fields(body, creating=False)
        if not names_a_change(body):
            raise ApiError(422, "missing_required_field", "Missing a field to change.")
        record = await drafts.update(team(), broadcast_id, fields, current_caller().key)
        return {"object": "broadcast", "id": record.id}

    @blueprint.delete("/broadcasts/<id:broadcast_id>")
    async def remove(broadcast_id: str) -> DeletedReference:
        record = await drafts.delete(team(), broadcast_id)
        return {"object": "broadcast", "id": record.id, "deleted": True}

    @blueprint.post("/broadcasts/<id:broadcast_id>/send")
    async def send(broadcast_id: str) -> IdOnly:
        scheduled = scheduled_at_of(await json_object())
        record = await drafts.send(
            team(), broadcast_id, ctx.now(), schedule=schedule_of(scheduled),
            key=current_caller().key,
        )  # fmt: skip
        return {"id": record.id}

    @blueprint.post("/broadcasts/<id:broadcast_id>/cancel")
    async def cancel(broadcast_id: str) -> Reference:
        record = await drafts.cancel(team(), broadcast_id, ctx.now())
        return {"object": "broadcast", "id": record.id}

    @blueprint.post("/broadcasts/<id:broadcast_id>/duplicate")
    async def duplicate(broadcast_id: str) -> tuple[Reference, int]:
        copy = await drafts.duplicate(team(), broadcast_id, ctx.now())
        return {"object": "broadcast", "id": copy.id}, 201

    @blueprint.get("/broadcasts/<id:broadcast_id>/recipients")
    async def recipients(broadcast_id: str) -> ListBody:
        record = find(broadcast_id)
        kind, wanted_email, bounce_type = _recipients_query(request.args)
        page = parse_page_request(request.args, default_limit=RECIPIENTS_PAGE)
        assert page.limit is not None

        def keep(row: RecipientRow) -> bool:
            if wanted_email is not None and wanted_email not in row.email.lower():
                return False
            return bounce_type is None or row.bounce_type == bounce_type

        rows, has_more = recipient_rows_page(
            spool, record.team_id, record.id, kind,
            after=page.after, before=page.before, limit=page.limit, keep=keep,
        )  # fmt: skip
        data = [dict(_recipient_json(record.team_id, kind, row_id, row)) for row_id, row in rows]
        return list_response(data, has_more)

    def _recipient_json(
        team_id: str, kind: str, row_id: str, row: RecipientRow
    ) -> BroadcastRecipient:
        contact_id = row.contact_id
        if contact_id is None:  # events name the address: its contact, if it still exists
            contact = find_contact(spool, team_id, row.email)
            contact_id = None if contact is None else contact.id
        item: BroadcastRecipient = {"id": row_id, "contact_id": contact_id, "email": row.email}
        if kind in ("opened", "clicked"):
            item["count"] = row.count
        if kind == "bounced":
            item["bounce_type"] = row.bounce_type or "undetermined"  # type: ignore[typeddict-item]
        if kind == "clicked":
            item["clicked_links"] = [{"url": url, "clicks": n} for url, n in row.links.items()]
        return item

    @blueprint.get("/broadcasts/<id:broadcast_id>/clicked-links")
    async def links(broadcast_id: str) -> ListBody:
        record = find(broadcast_id)
        page = parse_page_request(request.args, default_limit=None)
        items: list[ClickedLinkObject] = []
        for link, url in clicked_links(spool, record.team_id, record.id):
            clicks, unique = link_counts(spool, record.team_id, record.id, link)
            items.append({"id": link, "url": url, "clicks": clicks, "unique_clicks": unique})
        items.sort(key=lambda item: (-item["clicks"], item["url"]))
        window, has_more = page_of(items, page, lambda item: item["id"])
        return list_response([dict(item) for item in window], has_more)

    return blueprint


def _recipients_query(args: Any) -> tuple[str, str | None, str | None]:
    """`type` (required), `email` (a part of the address, any case) and `bounce_type`."""
    kind = args.get("type")
    if not kind:
        raise ApiError(422, "missing_required_parameter", "Missing `type` parameter.")
    if kind not in RECIPIENT_TYPES:
        raise validation_error(f"The `type` parameter must be one of {', '.join(RECIPIENT_TYPES)}.")
    bounce_type = args.get("bounce_type") or None
    if bounce_type is not None:
        if kind != "bounced":
            raise validation_error("The `bounce_type` parameter goes with `type=bounced` only.")
        if bounce_type not in BOUNCE_TYPES:
            raise validation_error(f"The `bounce_type` must be one of {', '.join(BOUNCE_TYPES)}.")
    email = args.get("email") or None
    return kind, None if email is None else email.lower(), bounce_type
