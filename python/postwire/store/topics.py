"""Topics: the kinds of mail a team sends (a newsletter, product news) that contacts opt in to
or out of. A contact's explicit choices live on its record (`ContactRecord.topics`); without
one, the topic's `default_subscription` applies."""

from __future__ import annotations

from dataclasses import dataclass

from postwire._core import WriteBatch
from postwire.store.contacts import ContactRecord
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import TeamRecords

SUBSCRIPTIONS = ("opt_in", "opt_out")
VISIBILITIES = ("public", "private")


@dataclass(frozen=True, slots=True)
class TopicRecord:
    id: str
    team_id: str
    name: str
    description: str | None
    default_subscription: str  # "opt_in" | "opt_out"; never changes
    visibility: str  # "public" (shown on the preference page) | "private"
    created_at: str  # store.accounts.contract_timestamp


TOPICS = Table("topics", TopicRecord)
_TOPICS: TeamRecords[TopicRecord] = TeamRecords(TOPICS)


def get_topic(spool: Spool, team_id: str, topic_id: str) -> TopicRecord | None:
    return _TOPICS.get(spool, team_id, topic_id)


async def get_topic_parked(spool: Spool, team_id: str, topic_id: str) -> TopicRecord | None:
    return await _TOPICS.aget(spool, team_id, topic_id)


def put_topic(batch: WriteBatch, topic: TopicRecord) -> None:
    _TOPICS.put(batch, topic)


def delete_topic(batch: WriteBatch, topic: TopicRecord) -> None:
    """Remove the topic; contacts' choices about it stay on their records, unread."""
    _TOPICS.delete(batch, topic)


def subscription(contact: ContactRecord, topic: TopicRecord) -> str:
    """ "opt_in" or "opt_out": the contact's own choice, else the topic's default."""
    return contact.topics.get(topic.id, topic.default_subscription)
