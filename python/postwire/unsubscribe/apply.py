"""Applying what a recipient asks through an unsubscribe link or address: unsubscribe, subscribe
again, save the topic preferences.

Each change is read, decided (`unsubscribe.changes`) and committed under the contact's record
lock, in one batch with its `contact.updated` webhook and, for an unsubscribe, the broadcast's
`unsubscribed` count and recipient row and the metrics' `unsubscribed` count (once per contact
and broadcast). A request that changes nothing writes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from postwire._core import WriteBatch
from postwire.domains.store import scan_all_domains
from postwire.store.accounts import contract_timestamp
from postwire.store.broadcasts import BroadcastRecord, count_unsubscribe, get_broadcast
from postwire.store.contacts import ContactRecord, contact_key, get_contact, put_contact
from postwire.store.metric_counters import count_unsubscribed
from postwire.store.spool import Spool
from postwire.store.topics import TopicRecord, get_topic, subscription
from postwire.store.unsubscribes import public_topics, unsubscribe_counted
from postwire.unsubscribe.changes import (
    Standing,
    resubscribed,
    standing,
    unsubscribed,
    with_preferences,
)
from postwire.unsubscribe.links import UnsubscribeTarget, parse_mailto_address, parse_mailto_token

# Public topics shown on one preference page at most.
MAX_PREFERENCE_TOPICS: Final = 100

Decide = Callable[[ContactRecord, TopicRecord | None, str], ContactRecord | None]


@dataclass(frozen=True, slots=True)
class TopicChoice:
    topic: TopicRecord
    subscribed: bool


@dataclass(frozen=True, slots=True)
class Recipient:
    """What the hosted page shows: the contact, where it stands towards the broadcast's mail,
    and the team's public topics with its subscription to each."""

    target: UnsubscribeTarget
    contact: ContactRecord
    topic: TopicRecord | None  # the broadcast's, when it was sent to one that still exists
    sender: str | None  # the broadcast's From, None once the broadcast is gone
    standing: Standing
    choices: list[TopicChoice]


@dataclass(frozen=True, slots=True)
class Applied:
    recipient: Recipient
    changed: bool


def _topic_of(spool: Spool, broadcast: BroadcastRecord | None) -> TopicRecord | None:
    """The topic the broadcast was sent to, if any and if it still exists."""
    if broadcast is None or broadcast.topic_id is None:
        return None
    return get_topic(spool, broadcast.team_id, broadcast.topic_id)


def find_recipient(spool: Spool, target: UnsubscribeTarget) -> Recipient | None:
    """The target's contact as the page shows it; None once the contact is deleted."""
    contact = get_contact(spool, target.team_id, target.contact_id)
    if contact is None:
        return None
    return _recipient(spool, target, contact)


def _recipient(spool: Spool, target: UnsubscribeTarget, contact: ContactRecord) -> Recipient:
    broadcast = get_broadcast(spool, target.team_id, target.broadcast_id)
    topic = _topic_of(spool, broadcast)
    shown = public_topics(spool, target.team_id, MAX_PREFERENCE_TOPICS)
    choices = [TopicChoice(t, subscription(contact, t) == "opt_in") for t in shown]
    sender = None if broadcast is None else broadcast.sender
    return Recipient(target, contact, topic, sender, standing(contact, topic), choices)


async def unsubscribe(spool: Spool, target: UnsubscribeTarget, now_ms: int) -> Applied | None:
    """Unsubscribe the target's contact from its broadcast's mail (see `changes`), counted
    for the broadcast; None when the contact no longer exists."""
    return await _apply(spool, target, now_ms, unsubscribed, count=True)


async def resubscribe(spool: Spool, target: UnsubscribeTarget, now_ms: int) -> Applied | None:
    return await _apply(spool, target, now_ms, resubscribed)


async def save_preferences(
    spool: Spool, target: UnsubscribeTarget, chosen: Collection[str], now_ms: int
) -> Applied | None:
    """Opt the contact in to the chosen public topics and out of the other public ones."""
    shown = public_topics(spool, target.team_id, MAX_PREFERENCE_TOPICS)

    def decide(contact: ContactRecord, _: TopicRecord | None, at: str) -> ContactRecord | None:
        return with_preferences(contact, shown, chosen, at)

    return await _apply(spool, target, now_ms, decide)


async def _apply(
    spool: Spool,
    target: UnsubscribeTarget,
    now_ms: int,
    decide: Decide,
    *,
    count: bool = False,
) -> Applied | None:
    team, broadcast_id = target.team_id, target.broadcast_id
    async for attempt in spool.guarded(contact_key(team, target.contact_id)):
        with attempt:
            contact = get_contact(spool, team, target.contact_id)
            if contact is None:
                return None
            broadcast = get_broadcast(spool, team, broadcast_id)
            topic = _topic_of(spool, broadcast)
            updated_at = contract_timestamp(datetime.fromtimestamp(now_ms / 1000, UTC))
            changed = decide(contact, topic, updated_at)
            if changed is None:
                return Applied(_recipient(spool, target, contact), changed=False)
            batch = WriteBatch()
            written = put_contact(batch, spool, contact, changed, now_ms, event="contact.updated")
            if (
                count
                and broadcast is not None
                and not unsubscribe_counted(spool, team, broadcast_id, contact.id)
            ):
                count_unsubscribe(batch, team, broadcast_id, contact.id, contact.email)
                count_unsubscribed(batch, spool, team, broadcast_id, contact.id, now_ms)
            await spool.commit(batch)
    return Applied(_recipient(spool, target, written), changed=True)


class MailtoAddress(enum.Enum):
    """What a recipient address is to the unsubscribe path."""

    OTHER = "other"  # not an unsubscribe address of one of Postwire's return-path hosts
    FORGED = "forged"  # shaped like one, at one of our hosts, but not one Postwire made


def mailto_target(spool: Spool, secret: bytes, address: str) -> UnsubscribeTarget | MailtoAddress:
    """The target of an unsubscribe address (`unsub+<token>@<return-path host>`); its host's
    teams are the candidates the token's tag decides among. The local part is checked first,
    so ordinary recipients cost no look-up."""
    parsed = parse_mailto_address(address)
    if parsed is None:
        return MailtoAddress.OTHER
    token, host = parsed
    teams = {d.team_id for d in scan_all_domains(spool) if d.return_path_host == host}
    if not teams:
        return MailtoAddress.OTHER
    target = parse_mailto_token(secret, token, sorted(teams))
    return MailtoAddress.FORGED if target is None else target
