"""What an unsubscribe, a subscribe-again or a saved preference page changes on a contact:
pure functions, each returning the contact to write, or None when nothing changes (so a repeated
request writes nothing and raises no webhook).

A broadcast sent to a topic is unsubscribed from that topic only (the contact is opted out of
it, as Resend's hosted page does); a broadcast without a topic sets the contact's global
`unsubscribed`. Either way the contact receives no more mail of that kind.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import replace

from postwire.store.contacts import ContactRecord
from postwire.store.topics import TopicRecord, subscription


class Standing(enum.Enum):
    """Where a contact stands towards the mail of one broadcast."""

    SUBSCRIBED = "subscribed"
    UNSUBSCRIBED = "unsubscribed"  # globally: no broadcast reaches it
    OPTED_OUT = "opted_out"  # of the broadcast's topic only


def standing(contact: ContactRecord, topic: TopicRecord | None) -> Standing:
    if contact.unsubscribed:
        return Standing.UNSUBSCRIBED
    if topic is not None and subscription(contact, topic) == "opt_out":
        return Standing.OPTED_OUT
    return Standing.SUBSCRIBED


def unsubscribed(
    contact: ContactRecord, topic: TopicRecord | None, updated_at: str
) -> ContactRecord | None:
    """The contact opted out of `topic`, or unsubscribed when there is none."""
    if standing(contact, topic) is not Standing.SUBSCRIBED:
        return None
    if topic is None:
        return replace(contact, unsubscribed=True, updated_at=updated_at)
    topics = {**contact.topics, topic.id: "opt_out"}
    return replace(contact, topics=topics, updated_at=updated_at)


def resubscribed(
    contact: ContactRecord, topic: TopicRecord | None, updated_at: str
) -> ContactRecord | None:
    """The contact receiving the broadcast's kind of mail again: its global opt-out lifted
    (topic choices kept), else opted in to `topic`."""
    match standing(contact, topic):
        case Standing.UNSUBSCRIBED:
            return replace(contact, unsubscribed=False, updated_at=updated_at)
        case Standing.OPTED_OUT if topic is not None:
            topics = {**contact.topics, topic.id: "opt_in"}
            return replace(contact, topics=topics, updated_at=updated_at)
        case _:
            return None


def with_preferences(
    contact: ContactRecord,
    shown: Iterable[TopicRecord],
    chosen: Collection[str],
    updated_at: str,
) -> ContactRecord | None:
    """The contact opted in to the `shown` topics whose ids are `chosen`, out of the others;
    ids of topics not shown are ignored. Only topics whose subscription changes are written
    as explicit choices."""
    topics = dict(contact.topics)
    for topic in shown:
        wanted = "opt_in" if topic.id in chosen else "opt_out"
        if subscription(contact, topic) != wanted:
            topics[topic.id] = wanted
    if topics == contact.topics:
        return None
    return replace(contact, topics=topics, updated_at=updated_at)
