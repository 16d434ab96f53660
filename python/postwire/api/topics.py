"""`/topics` (contract section 6.3) and `/contacts/{id}/topics`: the kinds of mail a team sends
and each contact's subscription to them.

A topic's `default_subscription` is fixed at creation: it is what a contact without a choice of
its own gets, so changing it would move every such contact at once. A contact's choices are
kept on its record and change with a `contact.updated` webhook.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast
from urllib.parse import unquote

from quart import Blueprint, request

from postwire.api.audience_models import (
    ContactTopicItem,
    ContactTopicsUpdated,
    TopicObject,
    TopicSummary,
    UpdateTopicBody,
)
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, parse_page_request
from postwire.api.request_body import json_body, json_object, require_a_change
from postwire.api.store_pages import store_page_parked
from postwire.audiences.contact_rules import (
    missing_field,
    topic_choices,
)
from postwire.audiences.contacts import change_contact, contact_not_found
from postwire.audiences.records import require_topic_parked
from postwire.audiences.topics import create_topic, remove_topic, update_topic
from postwire.errors import validation_error
from postwire.store.contacts import ContactRecord, find_contact_parked
from postwire.store.team_records import team_prefix
from postwire.store.topics import (
    TOPICS,
    TopicRecord,
    subscription,
)

# Topics are listed 20 at a time unless `limit` says otherwise (contract section 1.4).
DEFAULT_PAGE = 20


def topic_summary(topic: TopicRecord) -> TopicSummary:
    # A topic without a description has none (the Node SDK types it optional, not nullable);
    # a contact's topic says null (`contact_topic`), as that type does.
    described = {} if topic.description is None else {"description": topic.description}
    return cast(
        TopicSummary,
        {
            "id": topic.id,
            "name": topic.name,
            **described,
            "default_subscription": topic.default_subscription,
            "visibility": topic.visibility,
            "created_at": topic.created_at,
        },
    )


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("topics", __name__)
    spool = ctx.spool

    def team() -> str:
        return current_caller().team_id

    @blueprint.post("/topics")
    async def create() -> tuple[Reference, int]:
        topic = await create_topic(spool, team(), await json_object(), ctx.now())
        return {"object": "topic", "id": topic.id}, 201

    @blueprint.get("/topics")
    async def list_all() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        rows, has_more = await store_page_parked(TOPICS, spool, team_prefix(team()), page)
        return list_response([dict(topic_summary(t)) for _, t in rows], has_more)

    @blueprint.get("/topics/<id:topic_id>")
    async def get_one(topic_id: str) -> TopicObject:
        topic = await require_topic_parked(spool, team(), topic_id)
        return cast(TopicObject, {"object": "topic", **topic_summary(topic)})

    @blueprint.patch("/topics/<id:topic_id>")
    async def update(topic_id: str) -> Reference:
        body = await json_object()
        if body.get("default_subscription") is not None:
            raise validation_error("A topic's `default_subscription` cannot be changed.")
        require_a_change(body, UpdateTopicBody)
        topic = await update_topic(spool, team(), topic_id, body)
        return {"object": "topic", "id": topic.id}

    @blueprint.delete("/topics/<id:topic_id>")
    async def delete(topic_id: str) -> DeletedReference:
        topic = await remove_topic(spool, team(), topic_id)
        return {"object": "topic", "id": topic.id, "deleted": True}

    contact_topics = "/contacts/<id_or_address:contact_id_or_email>/topics"

    @blueprint.get(contact_topics)
    async def topics_of_contact(contact_id_or_email: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        team_id = team()
        contact = await find_contact_parked(spool, team_id, unquote(contact_id_or_email))
        if contact is None:
            raise contact_not_found()
        rows, has_more = await store_page_parked(TOPICS, spool, team_prefix(team_id), page)
        data: list[dict[str, Any]] = [dict(contact_topic(contact, t)) for _, t in rows]
        return list_response(data, has_more)

    @blueprint.patch(contact_topics)
    async def choose(contact_id_or_email: str) -> ContactTopicsUpdated:
        body = await json_body()
        # The Python and Rust SDKs send the array alone; the documented body wraps it.
        raw = body.get("topics") if isinstance(body, dict) else body
        if raw is None:
            raise missing_field("topics")
        choices = topic_choices(raw)
        team_id = team()
        for topic_id in choices:
            await require_topic_parked(spool, team_id, topic_id)
        contact = await change_contact(
            spool,
            team_id,
            unquote(contact_id_or_email),
            lambda c: replace(c, topics={**c.topics, **choices}),
            ctx.now(),
        )
        topics = [{"id": topic_id, "subscription": value} for topic_id, value in choices.items()]
        return cast(
            ContactTopicsUpdated,
            {
                "object": "contact_topics",
                "id": contact.id,
                "contact_id": contact.id,
                "topics": topics,
            },
        )

    return blueprint


def contact_topic(contact: ContactRecord, topic: TopicRecord) -> ContactTopicItem:
    return cast(
        ContactTopicItem,
        {
            "id": topic.id,
            "name": topic.name,
            "description": topic.description,
            "subscription": subscription(contact, topic),
            "created_at": topic.created_at,
        },
    )
