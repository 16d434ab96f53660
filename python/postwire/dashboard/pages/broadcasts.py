"""The Broadcasts pages: the team's broadcasts, a new draft, and a broadcast's page.

    GET  /broadcasts                          newest first, with status, segment and counts
    POST /broadcasts                          a new draft, then on to the editor
    GET  /broadcasts/<id>                     its page: details, checklist, send, schedule,
                                              cancel, a test send, live progress
    GET  /broadcasts/<id>/progress            its status and counts as JSON, for the live page
    GET  /broadcasts/<id>/html                its HTML, for the page's sandboxed frame

The changes (send, schedule, cancel, test, audience) are `broadcast_send`'s; image uploads
`broadcast_images`'. Every look-up is under the viewer's team: another team's id is a 404.
Members may read; changes need an admin (the guard's default for POST).
"""

from __future__ import annotations

from typing import Any, Final

from quart import Blueprint, Response, g, redirect, render_template, request
from werkzeug.exceptions import NotFound

from postwire.broadcasts.checklist import blocking, send_checklist
from postwire.broadcasts.documents import start_blank_document, team_brand_parked
from postwire.broadcasts.drafts import BroadcastDrafts, looks_like_id
from postwire.concurrency import in_order
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages import broadcast_images, broadcast_send
from postwire.dashboard.pages.broadcast_editor import preview_policy
from postwire.dashboard.pages.refusals import Redirect, refused
from postwire.dashboard.time_zones import time_zones
from postwire.errors import ApiError
from postwire.store.broadcast_documents import get_document_parked
from postwire.store.broadcasts import (
    BROADCASTS,
    PENDING_STATUSES,
    BroadcastRecord,
    broadcast_counts_parked,
    broadcasts_prefix,
)
from postwire.store.contacts import ContactRecord, get_contact_parked
from postwire.store.pages import newest_first_page_parked
from postwire.store.segments import (
    SEGMENTS,
    SegmentRecord,
    get_segment,
    get_segment_parked,
    segment_member_count_parked,
    segment_members_parked,
)
from postwire.store.team_records import team_prefix
from postwire.store.topics import TOPICS, TopicRecord, get_topic_parked

PER_PAGE: Final = 50
# The list's broadcasts (their counters) and segments read at once from a table store on the
# network.
READS_AT_ONCE: Final = 16
# Segments and topics offered in a broadcast's choices.
MAX_CHOICES: Final = 500
# Contacts of the segment suggested to fill a test send as.
SUGGESTED_CONTACTS: Final = 20
# The counts the page shows, in order, with their words.
PROGRESS: Final = (
    ("queued", "Queued"),
    ("sent", "Sent"),
    ("delivered", "Delivered"),
    ("opened", "Opened"),
    ("clicked", "Clicked"),
    ("bounced", "Bounced"),
    ("complained", "Complained"),
    ("unsubscribed", "Unsubscribed"),
    ("suppressed", "Suppressed"),
    ("failed", "Failed"),
    ("skipped_unsubscribed", "Skipped: unsubscribed"),
    ("skipped_topic", "Skipped: opted out of the topic"),
)
UNTITLED: Final = "Untitled broadcast"


def team_id() -> str:
    team: str = g.viewer.team.id
    return team


def when(stamp: str | None) -> str:
    """A contract timestamp as the pages show it: `2026-11-25 09:30 UTC`."""
    return "" if not stamp else stamp[:16].replace("T", " ") + " UTC"


async def team_segments(ctx: DashboardContext) -> list[SegmentRecord]:
    rows, _ = await newest_first_page_parked(
        SEGMENTS, ctx.spool, team_prefix(team_id()), after=None, before=None, limit=MAX_CHOICES
    )
    return [segment for _, segment in rows]


async def team_topics(ctx: DashboardContext) -> list[TopicRecord]:
    rows, _ = await newest_first_page_parked(
        TOPICS, ctx.spool, team_prefix(team_id()), after=None, before=None, limit=MAX_CHOICES
    )
    return [topic for _, topic in rows]


async def suggested_contacts(ctx: DashboardContext, record: BroadcastRecord) -> list[str]:
    """The addresses of the segment's first contacts, offered to fill a test send as (the
    contacts read together)."""
    if not record.segment_id:
        return []
    members = await segment_members_parked(
        ctx.spool, record.team_id, record.segment_id, after_contact_id=None,
        limit=SUGGESTED_CONTACTS,
    )  # fmt: skip

    async def contact_of(contact_id: str) -> ContactRecord | None:
        return await get_contact_parked(ctx.spool, record.team_id, contact_id)

    found = await in_order(contact_of, members, at_once=SUGGESTED_CONTACTS)
    return [contact.email for contact in found if contact is not None]


async def progress_of(ctx: DashboardContext, record: BroadcastRecord) -> dict[str, Any]:
    """What the live page shows of a broadcast, from its counters (no scan)."""
    counts = await broadcast_counts_parked(ctx.spool, record.team_id, record.id)
    members = 0
    if record.segment_id and await get_segment_parked(ctx.spool, record.team_id, record.segment_id):
        members = await segment_member_count_parked(ctx.spool, record.team_id, record.segment_id)
    return {
        "id": record.id,
        "status": record.status,
        "counts": {name: counts.get(name, 0) for name, _ in PROGRESS},
        "members": members,
        "sent_at": when(record.sent_at),
        "finished_at": when(record.finished_at),
        "scheduled_at": when(record.scheduled_at),
        "live": record.status in PENDING_STATUSES,
    }


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("broadcasts", __name__)
    drafts = BroadcastDrafts(ctx.spool, ctx.acceptor)

    async def team_broadcast(broadcast_id: str) -> BroadcastRecord:
        try:
            return await drafts.find_parked(team_id(), broadcast_id)
        except ApiError as error:
            raise NotFound from error

    @bp.get("/broadcasts")
    async def list_page() -> str:
        after = request.args.get("after") or None
        if after is not None and not looks_like_id(after):
            after = None  # not a cursor this page made: the first page
        rows, has_more = await newest_first_page_parked(
            BROADCASTS, ctx.spool, broadcasts_prefix(team_id()),
            after=after, before=None, limit=PER_PAGE,
        )  # fmt: skip
        broadcasts = [record for _, record in rows]
        segment_ids = list(dict.fromkeys(r.segment_id for r in broadcasts if r.segment_id))

        async def segment_name(segment_id: str) -> str:
            segment = await get_segment_parked(ctx.spool, team_id(), segment_id)
            return segment.name if segment else "(deleted)"

        async def counts_of(record: BroadcastRecord) -> dict[str, int]:
            return await broadcast_counts_parked(ctx.spool, record.team_id, record.id)

        names = await in_order(segment_name, segment_ids, at_once=READS_AT_ONCE)
        counts = await in_order(counts_of, broadcasts, at_once=READS_AT_ONCE)
        return await render_template(
            "broadcasts.html",
            broadcasts=broadcasts,
            counts={r.id: count for r, count in zip(broadcasts, counts, strict=True)},
            segment_names=dict(zip(segment_ids, names, strict=True)),
            segments=await team_segments(ctx),
            when=when,
            untitled=UNTITLED,
            next_after=broadcasts[-1].id if has_more else None,
            paged=after is not None,
        )

    @bp.post("/broadcasts")
    async def create() -> Redirect:
        form = await request.form
        name = " ".join(form.get("name", "").split())[:256]
        segment_id = form.get("segment_id", "")
        if segment_id and (
            not looks_like_id(segment_id) or get_segment(ctx.spool, team_id(), segment_id) is None
        ):
            raise NotFound  # not a segment of the team
        try:
            record = await drafts.create(
                team_id(),
                {"name": name, "segment_id": segment_id, "sender": "", "subject": ""},
                ctx.now(),
            )
            await start_blank_document(ctx.spool, team_id(), record.id, now=ctx.now())
        except ApiError as error:
            return await refused(error, "/broadcasts")
        return redirect(f"/broadcasts/{record.id}/edit", 303)

    @bp.get("/broadcasts/<broadcast_id>")
    async def broadcast_page(broadcast_id: str) -> str:
        record = await team_broadcast(broadcast_id)
        segment = await get_segment_parked(ctx.spool, record.team_id, record.segment_id or "-")
        topic = (
            await get_topic_parked(ctx.spool, record.team_id, record.topic_id)
            if record.topic_id
            else None
        )
        editable = record.status in ("draft", "scheduled")
        checklist = (
            await send_checklist(
                ctx.spool, record, await team_brand_parked(ctx.spool, record.team_id)
            )
            if editable
            else []
        )
        return await render_template(
            "broadcasts_detail.html",
            broadcast=record,
            title=record.name or UNTITLED,
            segment=segment,
            topic=topic,
            segments=await team_segments(ctx) if editable else [],
            topics=await team_topics(ctx) if editable else [],
            has_document=await get_document_parked(ctx.spool, record.team_id, record.id)
            is not None,
            checklist=checklist,
            ready=not blocking(checklist),
            progress=await progress_of(ctx, record),
            progress_words=PROGRESS,
            when=when,
            suggested_contacts=await suggested_contacts(ctx, record) if editable else [],
            time_zones=time_zones() if editable else (),
        )

    @bp.get("/broadcasts/<broadcast_id>/progress")
    async def progress(broadcast_id: str) -> dict[str, Any]:
        return await progress_of(ctx, await team_broadcast(broadcast_id))

    @bp.get("/broadcasts/<broadcast_id>/html")
    async def broadcast_html(broadcast_id: str) -> Response:
        record = await team_broadcast(broadcast_id)
        if not record.html:
            raise NotFound
        response = Response(record.html, mimetype="text/html")
        # The editor's preview policy: no script, images only (Postwire's own uploads too).
        response.headers["Content-Security-Policy"] = preview_policy(ctx.config.api.public_url)
        return response

    broadcast_send.add_routes(bp, ctx, drafts, team_broadcast)
    broadcast_images.add_routes(bp, ctx)
    return bp
