"""The Audience pages besides contacts: segments, topics and contact properties, each a list
with a create form and a page of its own to edit or delete it.

    GET  /segments, POST /segments                 list, create
    GET  /segments/<segment_id>                    rename form and members (newest first)
    POST /segments/<segment_id>[/delete]           rename, delete
    GET  /topics, POST /topics, GET/POST /topics/<topic_id>, POST /topics/<topic_id>/delete
    GET  /properties, POST /properties, GET/POST /properties/<property_id>, POST .../delete

The rules and writes are `audiences`', shared with the REST API; members may look, changes
need an admin (the guard's default for a POST). Another team's id is a 404.
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, current_app, g, render_template, request

from postwire.audiences import properties, segments, topics
from postwire.audiences.contact_search import ContactFilter, find_contacts
from postwire.audiences.contacts import empty_deleted_segment
from postwire.audiences.csv_rows import parse_number
from postwire.audiences.records import (
    is_record_id,
    require_property_parked,
    require_segment_parked,
    require_topic_parked,
)
from postwire.concurrency import in_order
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.refusals import Redirect, done, found_or_404_parked, refused
from postwire.errors import ApiError
from postwire.store.contact_properties import CONTACT_PROPERTIES, ContactPropertyRecord
from postwire.store.pages import newest_first_page_parked
from postwire.store.segments import SEGMENTS, SegmentRecord, segment_member_count_parked
from postwire.store.team_records import team_prefix
from postwire.store.topics import TOPICS

PER_PAGE: Final = 50
# A page's segment member counts read at once from a table store on the network.
COUNTS_AT_ONCE: Final = 16
SUBSCRIPTION_WORDS: Final = {"opt_in": "Opted in", "opt_out": "Opted out"}


def fallback_of_form(kind: str, text: str) -> object:
    """A fallback as typed in a form: none when empty, a number for a number property (text
    that is no number is passed on, for the rule to refuse in its words)."""
    text = text.strip()
    if not text:
        return None
    if kind == "number":
        number = parse_number(text)
        return text if number is None else number
    return text


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("audience", __name__)
    spool = ctx.spool

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    def cursor() -> str | None:
        after = request.args.get("after")
        return after if after is not None and is_record_id(after) else None

    # --- segments ------------------------------------------------------------------------------

    @bp.get("/segments")
    async def segments_page() -> str:
        rows, more = await newest_first_page_parked(
            SEGMENTS, spool, team_prefix(team_id()), after=cursor(), before=None, limit=PER_PAGE
        )
        shown = [segment for _, segment in rows]

        async def count_of(segment: SegmentRecord) -> int:
            return await segment_member_count_parked(spool, segment.team_id, segment.id)

        counted = await in_order(count_of, shown, at_once=COUNTS_AT_ONCE)
        counts = {s.id: count for s, count in zip(shown, counted, strict=True)}
        return await render_template(
            "segments.html",
            segments=shown,
            counts=counts,
            next_after=shown[-1].id if more and shown else None,
            paged=cursor() is not None,
        )

    @bp.post("/segments")
    async def create_segment() -> Redirect:
        name = (await request.form).get("name", "")
        try:
            segment = await segments.create_segment(spool, team_id(), {"name": name}, ctx.now())
        except ApiError as error:
            return await refused(error, "/segments")
        return await done(f"The segment {segment.name} was created.", f"/segments/{segment.id}")

    @bp.get("/segments/<segment_id>")
    async def segment_page(segment_id: str) -> str:
        segment = await found_or_404_parked(
            lambda: require_segment_parked(spool, team_id(), segment_id)
        )
        after = request.args.get("after") if is_record_id(request.args.get("after", "")) else None
        members = await find_contacts(
            spool, segment.team_id, ContactFilter(segment_id=segment.id), limit=PER_PAGE,
            after=after,
        )  # fmt: skip
        return await render_template(
            "segments_detail.html",
            segment=segment,
            count=await segment_member_count_parked(spool, segment.team_id, segment.id),
            members=members,
            paged=after is not None,
        )

    @bp.post("/segments/<segment_id>")
    async def rename_segment(segment_id: str) -> Redirect:
        back = f"/segments/{segment_id}"
        await found_or_404_parked(lambda: require_segment_parked(spool, team_id(), segment_id))
        name = (await request.form).get("name", "")
        try:
            await segments.rename_segment(spool, team_id(), segment_id, {"name": name})
        except ApiError as error:
            return await refused(error, back)
        return await done(f"The segment is now called {name.strip()}.", back)

    @bp.post("/segments/<segment_id>/delete")
    async def delete_segment(segment_id: str) -> Redirect:
        try:
            segment = await segments.remove_segment(spool, team_id(), segment_id)
        except ApiError as error:
            return await refused(error, "/segments")
        # Its members leave it after the answer, as after the API's DELETE.
        current_app.add_background_task(empty_deleted_segment, spool, segment, ctx.now())
        return await done(f"The segment {segment.name} was deleted.", "/segments")

    # --- topics --------------------------------------------------------------------------------

    @bp.get("/topics")
    async def topics_page() -> str:
        rows, more = await newest_first_page_parked(
            TOPICS, spool, team_prefix(team_id()), after=cursor(), before=None, limit=PER_PAGE
        )
        shown = [topic for _, topic in rows]
        return await render_template(
            "topics.html",
            topics=shown,
            words=SUBSCRIPTION_WORDS,
            next_after=shown[-1].id if more and shown else None,
            paged=cursor() is not None,
        )

    async def topic_body() -> dict[str, object]:
        form = await request.form
        return {
            "name": form.get("name", ""),
            "description": form.get("description", "").strip() or None,
            "visibility": form.get("visibility") or None,
        }

    @bp.post("/topics")
    async def create_topic() -> Redirect:
        body = await topic_body()
        body["default_subscription"] = (await request.form).get("default_subscription") or None
        try:
            topic = await topics.create_topic(spool, team_id(), body, ctx.now())
        except ApiError as error:
            return await refused(error, "/topics")
        return await done(f"The topic {topic.name} was created.", "/topics")

    @bp.get("/topics/<topic_id>")
    async def topic_page(topic_id: str) -> str:
        topic = await found_or_404_parked(lambda: require_topic_parked(spool, team_id(), topic_id))
        return await render_template("topics_detail.html", topic=topic, words=SUBSCRIPTION_WORDS)

    @bp.post("/topics/<topic_id>")
    async def update_topic(topic_id: str) -> Redirect:
        back = f"/topics/{topic_id}"
        await found_or_404_parked(lambda: require_topic_parked(spool, team_id(), topic_id))
        try:
            topic = await topics.update_topic(spool, team_id(), topic_id, await topic_body())
        except ApiError as error:
            return await refused(error, back)
        return await done(f"The topic {topic.name} was saved.", back)

    @bp.post("/topics/<topic_id>/delete")
    async def delete_topic(topic_id: str) -> Redirect:
        try:
            topic = await topics.remove_topic(spool, team_id(), topic_id)
        except ApiError as error:
            return await refused(error, "/topics")
        return await done(f"The topic {topic.name} was deleted.", "/topics")

    # --- contact properties --------------------------------------------------------------------

    @bp.get("/properties")
    async def properties_page() -> str:
        rows, more = await newest_first_page_parked(
            CONTACT_PROPERTIES, spool, team_prefix(team_id()), after=cursor(), before=None,
            limit=PER_PAGE,
        )  # fmt: skip
        shown = [prop for _, prop in rows]
        return await render_template(
            "properties.html",
            properties=shown,
            next_after=shown[-1].id if more and shown else None,
            paged=cursor() is not None,
        )

    @bp.post("/properties")
    async def create_property() -> Redirect:
        form = await request.form
        kind = form.get("type", "")
        body = {
            "key": form.get("key", "").strip() or None,
            "type": kind or None,
            "fallback_value": fallback_of_form(kind, form.get("fallback_value", "")),
        }
        try:
            prop = await properties.create_property(spool, team_id(), body, ctx.now())
        except ApiError as error:
            return await refused(error, "/properties")
        return await done(f"The property {prop.key} was created.", "/properties")

    async def team_property(property_id: str) -> ContactPropertyRecord:
        return await found_or_404_parked(
            lambda: require_property_parked(spool, team_id(), property_id)
        )

    @bp.get("/properties/<property_id>")
    async def property_page(property_id: str) -> str:
        return await render_template(
            "properties_detail.html", prop=await team_property(property_id)
        )

    @bp.post("/properties/<property_id>")
    async def update_property(property_id: str) -> Redirect:
        prop = await team_property(property_id)
        back = f"/properties/{prop.id}"
        text = (await request.form).get("fallback_value", "")
        body = {"fallback_value": fallback_of_form(prop.type, text)}
        try:
            await properties.change_fallback(spool, prop.team_id, prop.id, body)
        except ApiError as error:
            return await refused(error, back)
        return await done(f"The fallback of {prop.key} was saved.", back)

    @bp.post("/properties/<property_id>/delete")
    async def delete_property(property_id: str) -> Redirect:
        try:
            prop = await properties.remove_property(spool, team_id(), property_id)
        except ApiError as error:
            return await refused(error, "/properties")
        return await done(f"The property {prop.key} was deleted.", "/properties")

    return bp
