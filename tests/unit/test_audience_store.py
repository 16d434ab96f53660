"""The audience tables over a real spool: contacts with their address index, segment member
rows and counters kept in step, contact webhooks in the same commit, newest-first pages."""

from __future__ import annotations

from dataclasses import replace

import pytest

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import KeyExistsError
from postwire.store import segments
from postwire.store.contact_properties import ContactPropertyRecord, property_values
from postwire.store.contacts import (
    CONTACTS,
    ContactRecord,
    delete_contact,
    find_contact,
    get_contact,
    put_contact,
)
from postwire.store.deliveries import EVENTS, OUTBOX
from postwire.store.pages import newest_first_page
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix
from postwire.store.topics import TopicRecord, subscription

TEAM = "team-a"
STAMP = "2026-11-25 10:00:00.123000+00"


def contact(email: str, **changes: object) -> ContactRecord:
    record = ContactRecord(_core.new_id(), TEAM, email, "Ada", None, False, STAMP, STAMP)
    return replace(record, **changes)


async def make_segment(spool: Spool, name: str = "news") -> str:
    segment = segments.SegmentRecord(_core.new_id(), TEAM, name, STAMP)
    batch = WriteBatch()
    segments.put_segment(batch, segment)
    await spool.commit(batch)
    return segment.id


async def write(
    spool: Spool, previous: ContactRecord | None, record: ContactRecord, event: str | None = None
) -> ContactRecord:
    batch = WriteBatch()
    written = put_contact(batch, spool, previous, record, 1_000, event=event)
    await spool.commit(batch)
    return written


def team_events(spool: Spool) -> list[tuple[str, dict[str, object]]]:
    return [(e.type, e.data) for _, e in EVENTS.scan(spool, prefix=f"{TEAM}/")]


async def test_a_contact_is_found_by_id_or_any_case_of_its_address(spool: Spool) -> None:
    ada = await write(spool, None, contact("Ada@Example.com"), "contact.created")
    assert get_contact(spool, TEAM, ada.id) == ada
    assert find_contact(spool, TEAM, ada.id) == ada
    assert find_contact(spool, TEAM, "ada@EXAMPLE.com") == ada
    assert find_contact(spool, "team-b", "ada@example.com") is None
    [(kind, data)] = team_events(spool)
    assert kind == "contact.created"
    assert data == {
        "id": ada.id,
        "audience_id": "",
        "segment_ids": [],
        "created_at": "2026-11-25T10:00:00.123Z",
        "updated_at": "2026-11-25T10:00:00.123Z",
        "email": "Ada@Example.com",
        "first_name": "Ada",  # no last_name: optional in the Node SDK's types, not nullable
        "unsubscribed": False,
    }
    assert len(OUTBOX.scan(spool)) == 1


async def test_an_address_belongs_to_one_contact_of_a_team(spool: Spool) -> None:
    ada = await write(spool, None, contact("ada@example.com"))
    with pytest.raises(KeyExistsError):
        await write(spool, None, contact("ADA@example.com"))
    other = await write(spool, None, contact("bob@example.com"))
    with pytest.raises(KeyExistsError):
        await write(spool, other, replace(other, email="ada@example.com"))
    await write(spool, None, contact("ada@example.com", team_id="team-b"))

    moved = await write(spool, ada, replace(ada, email="ada@new.example"))
    assert find_contact(spool, TEAM, "ada@example.com") is None
    assert find_contact(spool, TEAM, "ada@new.example") == moved
    # Case alone changes the record, not the index.
    await write(spool, moved, replace(moved, email="ADA@new.example"))
    assert find_contact(spool, TEAM, "ada@new.example") is not None


async def test_segment_members_and_counts_follow_the_contacts(spool: Spool) -> None:
    news, promo = await make_segment(spool), await make_segment(spool, "promo")
    people = [
        await write(spool, None, contact(f"p{n}@example.com", segment_ids=[news])) for n in range(5)
    ]
    assert segments.segment_member_count(spool, TEAM, news) == 5
    moved = await write(
        spool, people[0], replace(people[0], segment_ids=[promo]), "contact.updated"
    )
    assert segments.segment_member_count(spool, TEAM, news) == 4
    assert segments.segment_member_count(spool, TEAM, promo) == 1
    assert segments.is_member(spool, TEAM, promo, moved.id)
    assert team_events(spool)[-1][1]["audience_id"] == promo

    walked: list[str] = []
    cursor = None
    while batch := segments.segment_members(spool, TEAM, news, after_contact_id=cursor, limit=2):
        walked += batch
        cursor = batch[-1]
    assert walked == sorted(p.id for p in people[1:])

    batch = WriteBatch()
    delete_contact(batch, people[1], 2_000)
    await spool.commit(batch)
    assert segments.segment_member_count(spool, TEAM, news) == 3
    assert find_contact(spool, TEAM, "p1@example.com") is None
    assert team_events(spool)[-1][0] == "contact.deleted"


async def test_a_segment_deleted_meanwhile_is_not_joined(spool: Spool) -> None:
    news = await make_segment(spool)
    gone = segments.SegmentRecord(_core.new_id(), TEAM, "gone", STAMP)
    ada = await write(spool, None, contact("ada@example.com", segment_ids=[gone.id, news]))
    assert ada.segment_ids == [news]
    assert get_contact(spool, TEAM, ada.id) == ada
    assert segments.segment_members(spool, TEAM, gone.id, after_contact_id=None, limit=9) == []


async def test_pages_walk_newest_first_with_both_cursors(spool: Spool) -> None:
    ids = [(await write(spool, None, contact(f"p{n}@example.com"))).id for n in range(7)]
    newest = ids[::-1]

    def page(
        after: str | None = None, before: str | None = None, limit: int | None = None
    ) -> tuple[list[str], bool]:
        rows, more = newest_first_page(
            CONTACTS, spool, team_prefix(TEAM), after=after, before=before, limit=limit
        )
        return [key for key, _ in rows], more

    assert page() == (newest, False)
    assert page(limit=3) == (newest[:3], True)
    assert page(after=newest[2], limit=3) == (newest[3:6], True)
    assert page(after=newest[3], limit=3) == (newest[4:], False)
    assert page(before=newest[6], limit=2) == (newest[4:6], True)
    assert page(before=newest[2], limit=5) == (newest[:2], False)
    assert page(after=newest[0]) == (newest[1:], False)


@pytest.mark.parametrize(
    ("explicit", "default", "expected"),
    [
        ({}, "opt_in", "opt_in"),
        ({}, "opt_out", "opt_out"),
        ({"t1": "opt_out"}, "opt_in", "opt_out"),
        ({"t1": "opt_in"}, "opt_out", "opt_in"),
        ({"t2": "opt_out"}, "opt_in", "opt_in"),
    ],
)
def test_subscription_is_the_contacts_choice_else_the_default(
    explicit: dict[str, str], default: str, expected: str
) -> None:
    topic = TopicRecord("t1", TEAM, "News", None, default, "public", STAMP)
    assert subscription(contact("a@example.com", topics=explicit), topic) == expected


def test_property_values_fill_fallbacks_and_hide_stale_types() -> None:
    props = {
        "plan": ContactPropertyRecord("p1", TEAM, "plan", "string", "free", STAMP),
        "age": ContactPropertyRecord("p2", TEAM, "age", "number", None, STAMP),
        "score": ContactPropertyRecord("p3", TEAM, "score", "number", 0, STAMP),
    }
    ada = contact("a@example.com", properties={"age": 36, "score": "high", "gone": "x"})
    assert property_values(ada, props) == {"plan": "free", "age": 36, "score": 0}
