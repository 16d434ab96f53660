"""Unsubscribes over a real spool: the contact's change, its contact.updated webhook and the
broadcast's count commit together, once; a repeat writes nothing."""

from __future__ import annotations

from postwire import _core
from postwire._core import WriteBatch
from postwire.store.broadcasts import BroadcastRecord, broadcast_counts, put_broadcast
from postwire.store.contacts import ContactRecord, delete_contact, get_contact, put_contact
from postwire.store.deliveries import EVENTS
from postwire.store.spool import Spool
from postwire.store.topics import TopicRecord, put_topic
from postwire.unsubscribe.apply import (
    find_recipient,
    resubscribe,
    save_preferences,
    unsubscribe,
)
from postwire.unsubscribe.changes import Standing
from postwire.unsubscribe.links import UnsubscribeTarget

TEAM = _core.new_id()
STAMP = "2026-11-25 10:00:00.123000+00"
NOW_MS = 1_800_000_000_000


async def commit(spool: Spool, *writes: ContactRecord | TopicRecord | BroadcastRecord) -> None:
    batch = WriteBatch()
    for record in writes:
        if isinstance(record, ContactRecord):
            put_contact(batch, spool, None, record, NOW_MS, event=None)
        elif isinstance(record, TopicRecord):
            put_topic(batch, record)
        else:
            put_broadcast(batch, record)
    await spool.commit(batch)


def new_contact(email: str = "ann@example.com") -> ContactRecord:
    return ContactRecord(_core.new_id(), TEAM, email, "Ann", None, False, STAMP, STAMP)


def new_topic(name: str, default: str = "opt_in", visibility: str = "public") -> TopicRecord:
    return TopicRecord(_core.new_id(), TEAM, name, None, default, visibility, STAMP)


def new_broadcast(topic_id: str | None = None) -> BroadcastRecord:
    return BroadcastRecord(
        _core.new_id(), TEAM, _core.new_id(), "Acme News <news@acme.example>", "Hello", STAMP,
        status="sent", topic_id=topic_id,
    )  # fmt: skip


def events(spool: Spool) -> list[tuple[str, dict[str, object]]]:
    return [(e.type, e.data) for _, e in EVENTS.scan(spool, prefix=f"{TEAM}/")]


async def test_unsubscribe_flips_the_contact_once_with_its_webhook_and_count(
    spool: Spool,
) -> None:
    ann, broadcast = new_contact(), new_broadcast()
    await commit(spool, ann, broadcast)
    target = UnsubscribeTarget(TEAM, ann.id, broadcast.id)

    applied = await unsubscribe(spool, target, NOW_MS)
    assert applied is not None and applied.changed
    assert applied.recipient.standing is Standing.UNSUBSCRIBED
    assert applied.recipient.sender == broadcast.sender
    stored = get_contact(spool, TEAM, ann.id)
    assert stored is not None and stored.unsubscribed and stored.updated_at != STAMP
    [(kind, data)] = events(spool)
    assert kind == "contact.updated"
    assert data["id"] == ann.id and data["unsubscribed"] is True
    assert broadcast_counts(spool, TEAM, broadcast.id)["unsubscribed"] == 1

    again = await unsubscribe(spool, target, NOW_MS + 1)  # a second POST
    assert again is not None and not again.changed
    assert len(events(spool)) == 1
    assert get_contact(spool, TEAM, ann.id) == stored
    assert broadcast_counts(spool, TEAM, broadcast.id)["unsubscribed"] == 1


async def test_a_contact_counts_once_per_broadcast_even_after_subscribing_again(
    spool: Spool,
) -> None:
    ann, broadcast = new_contact(), new_broadcast()
    await commit(spool, ann, broadcast)
    target = UnsubscribeTarget(TEAM, ann.id, broadcast.id)
    await unsubscribe(spool, target, NOW_MS)
    back = await resubscribe(spool, target, NOW_MS + 1)
    assert back is not None and back.changed and back.recipient.standing is Standing.SUBSCRIBED
    await unsubscribe(spool, target, NOW_MS + 2)
    assert [kind for kind, _ in events(spool)] == ["contact.updated"] * 3
    assert [data["unsubscribed"] for _, data in events(spool)] == [True, False, True]
    assert broadcast_counts(spool, TEAM, broadcast.id)["unsubscribed"] == 1


async def test_a_topic_broadcast_opts_out_of_its_topic_only(spool: Spool) -> None:
    news, offers = new_topic("News"), new_topic("Offers", visibility="private")
    ann, broadcast = new_contact(), new_broadcast(news.id)
    await commit(spool, news, offers, ann, broadcast)
    target = UnsubscribeTarget(TEAM, ann.id, broadcast.id)

    recipient = find_recipient(spool, target)
    assert recipient is not None and recipient.topic == news
    assert [(c.topic.id, c.subscribed) for c in recipient.choices] == [(news.id, True)]

    applied = await unsubscribe(spool, target, NOW_MS)
    assert applied is not None and applied.recipient.standing is Standing.OPTED_OUT
    stored = get_contact(spool, TEAM, ann.id)
    assert stored is not None and not stored.unsubscribed
    assert stored.topics == {news.id: "opt_out"}
    assert broadcast_counts(spool, TEAM, broadcast.id)["unsubscribed"] == 1


async def test_preferences_change_public_topics_only(spool: Spool) -> None:
    news, offers = new_topic("News"), new_topic("Offers", default="opt_out")
    secret = new_topic("Internal", visibility="private")
    ann, broadcast = new_contact(), new_broadcast()
    await commit(spool, news, offers, secret, ann, broadcast)
    target = UnsubscribeTarget(TEAM, ann.id, broadcast.id)

    unchanged = await save_preferences(spool, target, {news.id}, NOW_MS)
    assert unchanged is not None and not unchanged.changed and events(spool) == []

    saved = await save_preferences(spool, target, {offers.id, secret.id}, NOW_MS)
    assert saved is not None and saved.changed
    stored = get_contact(spool, TEAM, ann.id)
    assert stored is not None and stored.topics == {news.id: "opt_out", offers.id: "opt_in"}
    assert [(c.topic.id, c.subscribed) for c in saved.recipient.choices] == [
        (news.id, False),
        (offers.id, True),
    ]
    assert [kind for kind, _ in events(spool)] == ["contact.updated"]
    assert broadcast_counts(spool, TEAM, broadcast.id)["unsubscribed"] == 0


async def test_a_deleted_contact_or_broadcast(spool: Spool) -> None:
    ann, bob = new_contact(), new_contact("bob@example.com")
    await commit(spool, ann, bob)
    batch = WriteBatch()
    delete_contact(batch, ann, NOW_MS)
    await spool.commit(batch)
    gone = UnsubscribeTarget(TEAM, ann.id, _core.new_id())
    assert find_recipient(spool, gone) is None
    assert await unsubscribe(spool, gone, NOW_MS) is None

    # The broadcast is gone (or never was): the global opt-out, and nothing to count.
    unknown_broadcast = _core.new_id()
    applied = await unsubscribe(spool, UnsubscribeTarget(TEAM, bob.id, unknown_broadcast), NOW_MS)
    assert applied is not None and applied.changed and applied.recipient.sender is None
    assert broadcast_counts(spool, TEAM, unknown_broadcast)["unsubscribed"] == 0
