"""The changes made from a broadcast's page: its segment and topic, a test send, send now,
schedule, cancel, delete, duplicate.

    POST /broadcasts/<id>/audience    segment_id, topic_id ("" for none)
    POST /broadcasts/<id>/test        to (up to 5 addresses), contact (an address or id: fill
                                      the placeholders as this contact)
    POST /broadcasts/<id>/send        after the checklist passes
    POST /broadcasts/<id>/schedule    scheduled_at: a date and time (datetime-local) in the
                                      IANA zone `time_zone` (UTC when absent)
    POST /broadcasts/<id>/cancel      a scheduled one goes back to draft; a sending one stops
    POST /broadcasts/<id>/delete      a draft or scheduled one
    POST /broadcasts/<id>/duplicate   a new draft of the same content (any status)

Each answers with a redirect to the broadcast's page (a duplicate: the new draft's), the
outcome or refusal shown there. The rules are `broadcasts.drafts`' (shared with the REST API);
the checklist is checked again here, at the moment of sending, not trusted from the page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from quart import Blueprint, request

from postwire.broadcasts.checklist import blocking, send_checklist
from postwire.broadcasts.documents import team_brand_parked
from postwire.broadcasts.drafts import BroadcastDrafts, Schedule, looks_like_id, send_now
from postwire.broadcasts.proof_sends import parse_proof_recipients, send_proofs
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.refusals import Redirect, done, refused
from postwire.dashboard.time_zones import parse_schedule_input, scheduled_in_words
from postwire.errors import ApiError, validation_error
from postwire.store.broadcasts import BroadcastRecord
from postwire.store.contacts import find_contact
from postwire.store.segments import get_segment
from postwire.store.topics import get_topic

# An address is at most 254 characters; anything longer names no contact.
MAX_CONTACT_REFERENCE: Final = 320


def add_routes(
    bp: Blueprint,
    ctx: DashboardContext,
    drafts: BroadcastDrafts,
    team_broadcast: Callable[[str], Awaitable[BroadcastRecord]],
) -> None:
    def page_of(record: BroadcastRecord) -> str:
        return f"/broadcasts/{record.id}"

    async def refuse_unready(record: BroadcastRecord) -> None:
        brand = await team_brand_parked(ctx.spool, record.team_id)
        failing = blocking(await send_checklist(ctx.spool, record, brand))
        if failing:
            reasons = " ".join(check.message for check in failing)
            raise validation_error(f"Not sent: {reasons}")

    async def send_checked(record: BroadcastRecord, schedule: Schedule) -> BroadcastRecord:
        return await drafts.send(
            record.team_id, record.id, ctx.now(), schedule=schedule, check=refuse_unready
        )

    @bp.post("/broadcasts/<broadcast_id>/audience")
    async def choose_audience(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        form = await request.form
        segment_id = form.get("segment_id", "").strip()
        topic_id = form.get("topic_id", "").strip()
        try:
            for chosen, find in ((segment_id, get_segment), (topic_id, get_topic)):
                if chosen and (
                    not looks_like_id(chosen) or find(ctx.spool, record.team_id, chosen) is None
                ):
                    raise ApiError(404, "not_found", "Not one of the team's")
            fields = {"segment_id": segment_id, "topic_id": topic_id or None}
            await drafts.update(record.team_id, record.id, fields)
        except ApiError as error:
            return await refused(error, page_of(record))
        return await done("The audience is saved.", page_of(record))

    @bp.post("/broadcasts/<broadcast_id>/test")
    async def test_send(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        form = await request.form
        chosen = form.get("contact", "").strip()
        try:
            recipients = parse_proof_recipients(form.get("to", ""))
            contact = None
            if chosen:
                if len(chosen) <= MAX_CONTACT_REFERENCE:
                    contact = find_contact(ctx.spool, record.team_id, chosen)
                if contact is None:
                    raise validation_error(f"No contact {chosen} in this team to fill it as.")
            await send_proofs(
                ctx.spool, ctx.acceptor, record, recipients,
                contact=contact, public_url=ctx.config.api.public_url, now=ctx.now(),
            )  # fmt: skip
        except ApiError as error:
            return await refused(error, page_of(record))
        if ctx.delivery is not None:
            ctx.delivery.wake()
        listed = ", ".join(recipients)
        return await done(
            f"A test was sent to {listed}. It is listed on the Emails page.", page_of(record)
        )

    @bp.post("/broadcasts/<broadcast_id>/send")
    async def send(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        try:
            await send_checked(record, send_now)
        except ApiError as error:
            return await refused(error, page_of(record))
        return await done("The broadcast is being sent.", page_of(record))

    @bp.post("/broadcasts/<broadcast_id>/schedule")
    async def schedule(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        form = await request.form
        value, zone = form.get("scheduled_at", ""), form.get("time_zone", "UTC")
        try:
            sent = await send_checked(record, lambda now: parse_schedule_input(value, zone, now))
        except ApiError as error:
            return await refused(error, page_of(record))
        words = scheduled_in_words(sent.scheduled_at or "", zone)
        return await done(f"The broadcast is scheduled for {words}.", page_of(record))

    @bp.post("/broadcasts/<broadcast_id>/cancel")
    async def cancel(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        try:
            canceled = await drafts.cancel(record.team_id, record.id, ctx.now())
        except ApiError as error:
            return await refused(error, page_of(record))
        if canceled.status == "draft":
            message = "The schedule is canceled: the broadcast is a draft again."
            return await done(message, page_of(record))
        return await done("Sending is stopped: no more messages are queued.", page_of(record))

    @bp.post("/broadcasts/<broadcast_id>/delete")
    async def delete(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        try:
            await drafts.delete(record.team_id, record.id)
        except ApiError as error:
            return await refused(error, page_of(record))
        name = record.name or "without a name"
        return await done(f"The broadcast {name} was deleted.", "/broadcasts")

    @bp.post("/broadcasts/<broadcast_id>/duplicate")
    async def duplicate(broadcast_id: str) -> Redirect:
        record = await team_broadcast(broadcast_id)
        copy = await drafts.duplicate(record.team_id, record.id, ctx.now())
        return await done("This is a copy: a new draft.", page_of(copy))
