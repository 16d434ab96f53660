"""Contacts: the team's list with search and filters, a contact's page (its properties,
segments, topics, unsubscribed flag and the emails sent to it), and adding, editing and
deleting one.

    GET  /contacts                        search (address prefix), filters, cursor paging
    GET  /contacts/new, POST /contacts/new  the add form (shown to admins)
    GET  /contacts/<contact_id>           its page; its edit form for admins
    POST /contacts/<contact_id>           save the edit form
    POST /contacts/<contact_id>/delete    delete it

The list reads at most `SCAN_BUDGET` contacts a request (`audiences.contact_search`). The
emails a contact received come from the emails' recipient index (`store.email_index`), newest
first. The rules and writes are `audiences`', shared with the REST API.
"""

from __future__ import annotations

from typing import Any, Final

from quart import Blueprint, g, render_template, request
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import NotFound

from postwire.audiences.contact_rules import contact_changes
from postwire.audiences.contact_search import SCAN_BUDGET, find_contacts
from postwire.audiences.contacts import add_contact, change_contact, remove_contact
from postwire.audiences.records import is_record_id
from postwire.concurrency import in_order
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.audience_contact_form import (
    PROPERTY_FIELD,
    TOPIC_FIELD,
    chosen_segments,
    contact_body,
    with_memberships,
)
from postwire.dashboard.pages.audience_contact_query import parse_contact_query
from postwire.dashboard.pages.refusals import Redirect, done, in_plain_words, refused
from postwire.errors import ApiError
from postwire.store.contact_properties import team_properties_parked, value_fits
from postwire.store.contacts import ContactRecord, get_contact_parked
from postwire.store.email_index import emails_sent_to_parked
from postwire.store.emails import EMAILS, EmailRecord, email_key
from postwire.store.segments import SEGMENTS, SegmentRecord
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix
from postwire.store.topics import TOPICS, TopicRecord, subscription

PER_PAGE: Final = 50
EMAILS_SHOWN: Final = 20
# Segments and topics a page offers at most (a team has a handful; this bounds the page).
MAX_CHOICES: Final = 1000


async def team_segments(spool: Spool, team_id: str) -> dict[str, SegmentRecord]:
    rows = await SEGMENTS.ascan(spool, prefix=team_prefix(team_id), limit=MAX_CHOICES)
    return {segment.id: segment for _, segment in rows}


async def team_topics(spool: Spool, team_id: str) -> dict[str, TopicRecord]:
    rows = await TOPICS.ascan(spool, prefix=team_prefix(team_id), limit=MAX_CHOICES)
    return {topic.id: topic for _, topic in rows}


async def emails_to(spool: Spool, contact: ContactRecord) -> list[EmailRecord]:
    """The newest emails with the contact's address among their recipients (to, cc or bcc),
    read from the recipient index written in each email's commit (the emails read together)."""
    ids = await emails_sent_to_parked(spool, contact.team_id, contact.email, EMAILS_SHOWN)

    async def email_of(email_id: str) -> EmailRecord | None:
        return await EMAILS.aget(spool, email_key(contact.team_id, email_id))

    found = await in_order(email_of, ids, at_once=EMAILS_SHOWN)
    return [email for email in found if email is not None]


def form_values(form: MultiDict[str, str]) -> dict[str, Any]:
    """What the add form shows again after a refusal: the text as it was typed."""
    return {
        "email": form.get("email", ""),
        "first_name": form.get("first_name", ""),
        "last_name": form.get("last_name", ""),
        "unsubscribed": "unsubscribed" in form,
        "properties": {
            name.removeprefix(PROPERTY_FIELD): value
            for name, value in form.items()
            if name.startswith(PROPERTY_FIELD)
        },
        "segment_ids": form.getlist("segments"),
    }


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("contacts", __name__)
    spool = ctx.spool

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    async def team_contact(contact_id: str) -> ContactRecord:
        if not is_record_id(contact_id):
            raise NotFound
        contact = await get_contact_parked(spool, team_id(), contact_id)
        if contact is None:
            raise NotFound
        return contact

    @bp.get("/contacts")
    async def list_page() -> str:
        team = team_id()
        segments, topics = await team_segments(spool, team), await team_topics(spool, team)
        properties = await team_properties_parked(spool, team)
        query = parse_contact_query(request.args, segments, topics, properties)
        page = await find_contacts(spool, team, query.wanted, limit=PER_PAGE, after=query.after)
        return await render_template(
            "contacts.html",
            query=query,
            page=page,
            segments=segments,
            topics=topics,
            properties=properties,
            budget=SCAN_BUDGET,
        )

    async def new_form(values: dict[str, Any], error: str | None) -> str:
        team = team_id()
        return await render_template(
            "contacts_new.html",
            values=values,
            error=error,
            segments=await team_segments(spool, team),
            properties=await team_properties_parked(spool, team),
            property_field=PROPERTY_FIELD,
        )

    @bp.get("/contacts/new")
    async def new_page() -> str:
        return await new_form(form_values(MultiDict()), None)

    @bp.post("/contacts/new")
    async def create() -> Redirect | tuple[str, int]:
        form = await request.form
        team = team_id()
        body = contact_body(form, await team_properties_parked(spool, team))
        body["segments"] = chosen_segments(form, await team_segments(spool, team))
        try:
            contact = await add_contact(spool, team, body, ctx.now())
        except ApiError as error:
            if error.status == 404:
                raise NotFound from error
            return await new_form(form_values(form), in_plain_words(error)), 422
        return await done(f"The contact {contact.email} was added.", f"/contacts/{contact.id}")

    @bp.get("/contacts/<contact_id>")
    async def contact_page(contact_id: str) -> str:
        contact = await team_contact(contact_id)
        team = contact.team_id
        properties = await team_properties_parked(spool, team)
        topics = await team_topics(spool, team)
        return await render_template(
            "contacts_detail.html",
            contact=contact,
            properties=properties,
            values={
                key: contact.properties[key]
                for key, prop in properties.items()
                if key in contact.properties and value_fits(prop, contact.properties[key])
            },
            segments=await team_segments(spool, team),
            topics=topics,
            subscriptions={t.id: subscription(contact, t) for t in topics.values()},
            emails=await emails_to(spool, contact),
            emails_shown=EMAILS_SHOWN,
            property_field=PROPERTY_FIELD,
            topic_field=TOPIC_FIELD,
        )

    @bp.post("/contacts/<contact_id>")
    async def update(contact_id: str) -> Redirect:
        contact = await team_contact(contact_id)  # another team's id is a 404 before anything
        back = f"/contacts/{contact.id}"
        team = contact.team_id
        form = await request.form
        properties = await team_properties_parked(spool, team)
        body = contact_body(form, properties)
        shown = list(await team_segments(spool, team)) if "segments_shown" in form else []
        topics = list((await team_topics(spool, team)).values())

        def change(current: ContactRecord) -> ContactRecord:
            changed = contact_changes(current, body, properties)
            return with_memberships(changed, form, shown, topics)

        try:
            saved = await change_contact(spool, team, contact.id, change, ctx.now())
        except ApiError as error:
            return await refused(error, back)
        return await done(f"The contact {saved.email} was saved.", back)

    @bp.post("/contacts/<contact_id>/delete")
    async def delete(contact_id: str) -> Redirect:
        contact = await team_contact(contact_id)
        try:
            await remove_contact(spool, contact.team_id, contact.id, ctx.now())
        except ApiError as error:
            return await refused(error, "/contacts")
        return await done(f"The contact {contact.email} was deleted.", "/contacts")

    return bp
