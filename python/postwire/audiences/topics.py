"""Creating, changing and deleting topics: the rules and writes the REST API and the
dashboard share. A topic's `default_subscription` is fixed at creation: it is what every
contact without a choice of its own gets, so changing it would move all of them at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.contact_rules import (
    MAX_TOPIC_DESCRIPTION,
    MAX_TOPIC_NAME,
    choice,
    missing_field,
    optional_text,
    required_text,
    topic_visibility,
)
from postwire.audiences.records import require_topic
from postwire.errors import validation_error
from postwire.store.accounts import contract_timestamp
from postwire.store.spool import Spool
from postwire.store.topics import SUBSCRIPTIONS, TopicRecord, delete_topic, put_topic


def topic_lock_key(team_id: str, topic_id: str) -> str:
    return f"topics/{team_id}/{topic_id}"


async def create_topic(
    spool: Spool, team_id: str, body: Mapping[str, Any], now: datetime
) -> TopicRecord:
    name = required_text(body, "name", MAX_TOPIC_NAME)
    default = choice(body, "default_subscription", SUBSCRIPTIONS)
    if default is None:
        raise missing_field("default_subscription")
    topic = TopicRecord(
        id=_core.new_id(),
        team_id=team_id,
        name=name,
        description=optional_text(body, "description", MAX_TOPIC_DESCRIPTION),
        default_subscription=default,
        visibility=topic_visibility(body) or "private",
        created_at=contract_timestamp(now),
    )
    batch = WriteBatch()
    put_topic(batch, topic)
    await spool.commit(batch)
    return topic


async def update_topic(
    spool: Spool, team_id: str, topic_id: str, body: Mapping[str, Any]
) -> TopicRecord:
    """The topic with the `name`, `description` (null clears it) and `visibility` of `body`;
    a `default_subscription` is refused."""
    if body.get("default_subscription") is not None:
        raise validation_error("A topic's `default_subscription` cannot be changed.")
    async for attempt in spool.guarded(topic_lock_key(team_id, topic_id)):
        with attempt:
            topic = require_topic(spool, team_id, topic_id)
            if body.get("name") is not None:
                topic = replace(topic, name=required_text(body, "name", MAX_TOPIC_NAME))
            if "description" in body:
                description = optional_text(body, "description", MAX_TOPIC_DESCRIPTION)
                topic = replace(topic, description=description)
            topic = replace(topic, visibility=topic_visibility(body) or topic.visibility)
            batch = WriteBatch()
            put_topic(batch, topic)
            await spool.commit(batch)
    return topic


async def remove_topic(spool: Spool, team_id: str, topic_id: str) -> TopicRecord:
    """Delete the topic; contacts' choices about it stay on their records, unread."""
    async for attempt in spool.guarded(topic_lock_key(team_id, topic_id)):
        with attempt:
            topic = require_topic(spool, team_id, topic_id)
            batch = WriteBatch()
            delete_topic(batch, topic)
            await spool.commit(batch)
    return topic
