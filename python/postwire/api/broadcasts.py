"""Routes of `/broadcasts` (contract section 7): drafts, sending, canceling, and what became
of each recipient.

Every change of a broadcast is a read-modify-commit under its record lock, which the engine
takes too before it commits a page: a cancel or an update never races a page of the walk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from quart import Blueprint, request

from postwire import _core
from postwire._core import WriteBatch
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
from postwire.broadcasts.messages import parse_sender
from postwire.broadcasts.rules import refusal, status_after_cancel
from postwire.errors import ApiError, validation_error
from postwire.store.accounts import contract_timestamp
from postwire.store.broadcasts import (
    BOUNCE_TYPES,
    BROADCASTS,
    RECIPIENT_TYPES,
    BroadcastRecord,
    RecipientRow,
    broadcast_counts,
    broadcast_key,
    broadcasts_prefix,
    clicked_links,
    delete_broadcast,
    get_broadcast,
    link_counts,
    put_broadcast,
    recipient_rows_page,
    set_due,
)
from postwire.store.contacts import find_contact
from postwire.store.pages import newest_first_page
from postwire.store.segments import get_segment
from postwire.store.topics import get_topic

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


@dataclass(frozen=True, slots=True)
class _Change:
    record: BroadcastRecord  # as read under its lock
    batch: WriteBatch


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("broadcasts", __name__)
    spool = ctx.spool

    def find(broadcast_id: str) -> BroadcastRecord:
        record = get_broadcast(spool, current_caller().team_id, broadcast_id.lower())
        if record is None:
            raise ApiError(404, "not_found", "Broadcast not found")
        return record

    def check_references(team_id: str, fields: dict[str, Any]) -> None:
        """The segment and topic a body names are the caller's team's (else 404)."""
        segment = fields.get("segment_id")
        if segment is not None and get_segment(spool, team_id, segment) is None:
            raise ApiError(404, "not_found", "Segment not found")
        topic = fields.get("topic_id")
        if topic is not None and get_topic(spool, team_id, topic) is None:
            raise ApiError(404, "not_found", "Topic not found")

    def check_sendable(record: BroadcastRecord) -> None:
        """It has content, its segment and topic exist, and its sender may send (the 403)."""
        if not record.html and not record.text:
            raise ApiError(422, "missing_required_field", "Missing `html` or `text` field")
        check_references(
            record.team_id, {"segment_id": record.segment_id, "topic_id": record.topic_id}
        )
        sender_domain = parse_sender(record.sender)[1].rpartition("@")[2].lower()
        ctx.acceptor.sending_domain(record.team_id, current_caller().key, sender_domain)

    def ready_to_send(
        record: BroadcastRecord, scheduled: str | None, now: datetime
    ) -> BroadcastRecord:
        """The record queued (or scheduled) to send; refused as `/emails` would refuse its mail."""
        moment = None if scheduled is None else parse_scheduled_at(scheduled, now)
        check_sendable(record)
        due = moment or now
        return replace(
            record,
            status="queued" if moment is None else "scheduled",
            scheduled_at=None if moment is None else contract_timestamp(moment),
            due_at_ms=int(due.timestamp() * 1000),
        )

    @blueprint.post("/broadcasts")
    async def create() -> tuple[Reference, int]:
        body = await json_object()
        team = current_caller().team_id
        fields = broadcast_fields(body, creating=True)
        send, scheduled = send_flag(body)
        check_references(team, fields)
        now = ctx.now()
        record = BroadcastRecord(
            id=_core.new_id(), team_id=team, created_at=contract_timestamp(now), **fields
        )
        batch = WriteBatch()
        if send:
            record = ready_to_send(record, scheduled, now)
            set_due(batch, replace(record, due_at_ms=None), record.due_at_ms)
        put_broadcast(batch, record)
        await spool.commit(batch)
        return {"object": "broadcast", "id": record.id}, 201

    @blueprint.get("/broadcasts")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        rows, has_more = newest_first_page(
            BROADCASTS, spool, broadcasts_prefix(current_caller().team_id),
            after=page.after, before=page.before, limit=page.limit,
        )  # fmt: skip
        return list_response([dict(broadcast_summary(record)) for _, record in rows], has_more)

    @blueprint.get("/broadcasts/<id:broadcast_id>")
    async def get_one(broadcast_id: str) -> BroadcastObject:
        record = find(broadcast_id)
        return broadcast_json(record, broadcast_counts(spool, record.team_id, record.id))

    @asynccontextmanager
    async def changing(broadcast_id: str, action: str) -> AsyncIterator[_Change]:
        """The broadcast read under its record lock, `action` allowed in its status; what the
        block adds to the change's batch commits when it ends."""
        record = find(broadcast_id)
        async with spool.record_lock(broadcast_key(record.team_id, record.id)):
            record = find(broadcast_id)
            problem = refusal(record.status, action)
            if problem is not None:
                raise validation_error(problem)
            change = _Change(record, WriteBatch())
            yield change
            await spool.commit(change.batch)

    @blueprint.patch("/broadcasts/<id:broadcast_id>")
    async def update(broadcast_id: str) -> Reference:
        body = await json_object()
        fields = broadcast_fields(body, creating=False)
        if not names_a_change(body):
            raise ApiError(422, "missing_required_field", "Missing a field to change.")
        check_references(current_caller().team_id, fields)
        async with changing(broadcast_id, "update") as change:
            updated = replace(change.record, **fields)
            if updated.status == "scheduled":  # it will be sent as it now is
                check_sendable(updated)
            put_broadcast(change.batch, updated)
        return {"object": "broadcast", "id": change.record.id}

    @blueprint.delete("/broadcasts/<id:broadcast_id>")
    async def remove(broadcast_id: str) -> DeletedReference:
        async with changing(broadcast_id, "delete") as change:
            delete_broadcast(change.batch, change.record)
        return {"object": "broadcast", "id": change.record.id, "deleted": True}

    @blueprint.post("/broadcasts/<id:broadcast_id>/send")
    async def send(broadcast_id: str) -> IdOnly:
        scheduled = scheduled_at_of(await json_object())
        async with changing(broadcast_id, "send") as change:
            sent = ready_to_send(change.record, scheduled, ctx.now())
            set_due(change.batch, change.record, sent.due_at_ms)
            put_broadcast(change.batch, sent)
        return {"id": change.record.id}

    @blueprint.post("/broadcasts/<id:broadcast_id>/cancel")
    async def cancel(broadcast_id: str) -> Reference:
        async with changing(broadcast_id, "cancel") as change:
            record = change.record
            status = status_after_cancel(record.status)
            updated = replace(record, status=status, due_at_ms=None)
            if status == "draft":
                updated = replace(updated, scheduled_at=None)
            else:
                updated = replace(updated, finished_at=contract_timestamp(ctx.now()))
            set_due(change.batch, record, None)
            put_broadcast(change.batch, updated)
        return {"object": "broadcast", "id": change.record.id}

    @blueprint.post("/broadcasts/<id:broadcast_id>/duplicate")
    async def duplicate(broadcast_id: str) -> tuple[Reference, int]:
        source = find(broadcast_id)
        copy = BroadcastRecord(
            id=_core.new_id(),
            team_id=source.team_id,
            segment_id=source.segment_id,
            sender=source.sender,
            subject=source.subject,
            created_at=contract_timestamp(ctx.now()),
            name=f"{source.name} (copy)" if source.name else "",
            reply_to=source.reply_to,
            html=source.html,
            text=source.text,
            preview_text=source.preview_text,
            topic_id=source.topic_id,
        )
        batch = WriteBatch()
        put_broadcast(batch, copy)
        await spool.commit(batch)
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
