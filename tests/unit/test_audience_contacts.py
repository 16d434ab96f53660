"""Contact writes under their record locks, and a deleted segment's members taken out of it,
over a real spool."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.contacts import (
    change_contact,
    create_contact,
    delete_segment,
    empty_deleted_segment,
    empty_deleted_segments,
    new_contact,
    remove_contact,
)
from postwire.errors import ApiError
from postwire.store import segments
from postwire.store.contacts import get_contact, put_contact
from postwire.store.deliveries import EVENTS
from postwire.store.spool import Spool

TEAM = "team-a"
NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def event_kinds(spool: Spool) -> list[str]:
    return [event.type for _, event in EVENTS.scan(spool, prefix=f"{TEAM}/", limit=100_000)]


async def test_concurrent_changes_of_one_contact_both_hold(spool: Spool) -> None:
    ada = await create_contact(spool, new_contact(TEAM, "ada@example.org", NOW), NOW)

    async def set_name(name: str) -> None:
        await change_contact(spool, TEAM, "ada@example.org",
                             lambda c: replace(c, first_name=name), NOW)  # fmt: skip

    async def unsubscribe() -> None:
        await change_contact(spool, TEAM, ada.id, lambda c: replace(c, unsubscribed=True), NOW)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(set_name, "Ada")
        nursery.start_soon(unsubscribe)
    final = get_contact(spool, TEAM, ada.id)
    assert final is not None and final.first_name == "Ada" and final.unsubscribed
    # An unchanged contact commits nothing and reports nothing.
    await change_contact(spool, TEAM, ada.id, lambda c: c, NOW)
    assert event_kinds(spool) == ["contact.created", "contact.updated", "contact.updated"]

    with pytest.raises(ApiError) as missing:
        await change_contact(spool, TEAM, "bob@example.org", lambda c: c, NOW)
    assert missing.value.status == 404
    with pytest.raises(ApiError) as outside:
        await remove_contact(spool, TEAM, ada.id, NOW, segment_id="not-its-segment")
    assert outside.value.status == 404
    await remove_contact(spool, TEAM, "ADA@example.org", NOW)
    assert get_contact(spool, TEAM, ada.id) is None and event_kinds(spool)[-1] == "contact.deleted"


async def test_a_deleted_segment_lets_go_of_every_member(spool: Spool) -> None:
    news = segments.SegmentRecord(_core.new_id(), TEAM, "news", "t")
    other = segments.SegmentRecord(_core.new_id(), TEAM, "other", "t")
    batch = WriteBatch()
    segments.put_segment(batch, news)
    segments.put_segment(batch, other)
    await spool.commit(batch)
    batch = WriteBatch()
    ids = []
    for n in range(1_100):  # more than two cleanup commits' worth, written in one
        record = new_contact(TEAM, f"p{n}@example.org", NOW)
        joined = replace(record, segment_ids=[news.id, other.id])
        ids.append(put_contact(batch, spool, None, joined, 0, event="contact.created").id)
    await spool.commit(batch)
    assert segments.segment_member_count(spool, TEAM, news.id) == 1_100
    created = len(event_kinds(spool))

    await delete_segment(spool, news)
    assert segments.get_segment(spool, TEAM, news.id) is None
    assert segments.segments_being_emptied(spool) == [news]
    # Interrupted at its first wait, as a stop would: calling again finishes it.
    with trio.move_on_after(0) as interrupted:
        await empty_deleted_segment(spool, news, NOW)
    assert interrupted.cancelled_caught
    assert segments.segment_member_count(spool, TEAM, news.id) > 0
    await empty_deleted_segments(spool, NOW)
    assert segments.segments_being_emptied(spool) == []
    assert segments.segment_members(spool, TEAM, news.id, after_contact_id=None, limit=9) == []
    assert segments.segment_member_count(spool, TEAM, news.id) == 0
    assert spool.get("counters", segments.member_count_key(TEAM, news.id)) is None
    assert segments.segment_member_count(spool, TEAM, other.id) == 1_100
    for contact_id in (ids[0], ids[-1]):
        contact = get_contact(spool, TEAM, contact_id)
        assert contact is not None and contact.segment_ids == [other.id]
    assert len(event_kinds(spool)) == created  # leaving a deleted segment reports nothing
