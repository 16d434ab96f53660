"""The Contacts page's search over a real spool: the address index for the search box, a
segment's member rows, the other filters checked on what the walk reads within a budget, and
cursors that continue a page or a search cut short."""

from __future__ import annotations

from datetime import UTC, datetime

from postwire.audiences.contact_search import ContactFilter, find_contacts
from postwire.audiences.contacts import add_contact
from postwire.audiences.properties import create_property
from postwire.audiences.segments import create_segment
from postwire.audiences.topics import create_topic
from postwire.store.contacts import ContactRecord
from postwire.store.spool import Spool

TEAM = "team-a"
OTHER = "team-b"
NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def emails(contacts: list[ContactRecord]) -> list[str]:
    return [c.email for c in contacts]


async def test_search_filters_and_paging(spool: Spool) -> None:
    readers = await create_segment(spool, TEAM, {"name": "Readers"}, NOW)
    news = await create_topic(spool, TEAM, {"name": "News", "default_subscription": "opt_in"}, NOW)
    await create_property(spool, TEAM, {"key": "plan", "type": "string"}, NOW)
    await create_property(spool, TEAM, {"key": "seats", "type": "number"}, NOW)
    people = [
        {"email": "ada@example.org", "first_name": "Ada", "last_name": "Lovelace",
         "segments": [readers.id], "properties": {"plan": "Pro", "seats": 3}},
        {"email": "alan@example.org", "first_name": "Alan", "last_name": "Turing",
         "topics": [{"id": news.id, "subscription": "opt_out"}]},
        {"email": "grace@example.net", "first_name": "Grace", "unsubscribed": True,
         "segments": [readers.id], "properties": {"plan": "free"}},
    ]  # fmt: skip
    for body in people:
        await add_contact(spool, TEAM, body, NOW)
    await add_contact(spool, OTHER, {"email": "ada@example.com"}, NOW)

    async def found(**wanted: object) -> list[str]:
        page = await find_contacts(spool, TEAM, ContactFilter(**wanted), limit=10)  # type: ignore[arg-type]
        return emails(page.contacts)

    assert await found() == ["grace@example.net", "alan@example.org", "ada@example.org"]
    assert await found(address="A") == ["ada@example.org", "alan@example.org"]
    assert await found(address="ada@") == ["ada@example.org"]
    assert await found(name="tur") == ["alan@example.org"]
    assert await found(name="ada lov") == ["ada@example.org"]
    assert await found(segment_id=readers.id) == ["grace@example.net", "ada@example.org"]
    assert await found(segment_id=readers.id, address="g") == ["grace@example.net"]
    assert await found(topic_id=news.id, subscription="opt_out") == ["alan@example.org"]
    assert await found(topic_id=news.id, subscription="opt_in") == [
        "grace@example.net",
        "ada@example.org",
    ]
    assert await found(unsubscribed=True) == ["grace@example.net"]
    assert await found(unsubscribed=False, address="a") == ["ada@example.org", "alan@example.org"]
    assert await found(property_key="plan", property_value="pro") == ["ada@example.org"]
    assert await found(property_key="seats", property_value="3.0") == ["ada@example.org"]
    assert await found(property_key="seats", property_value="three") == []

    first = await find_contacts(spool, TEAM, ContactFilter(), limit=2)
    assert emails(first.contacts) == ["grace@example.net", "alan@example.org"]
    assert first.after is not None and not first.partial
    rest = await find_contacts(spool, TEAM, ContactFilter(), limit=2, after=first.after)
    assert emails(rest.contacts) == ["ada@example.org"] and rest.after is None

    by_address = await find_contacts(spool, TEAM, ContactFilter(address="a"), limit=1)
    assert by_address.source == "address" and by_address.after == "ada@example.org"
    more = await find_contacts(
        spool, TEAM, ContactFilter(address="a"), limit=1, after=by_address.after
    )
    assert emails(more.contacts) == ["alan@example.org"]


async def test_a_rare_match_is_found_within_the_budget_and_continued(spool: Spool) -> None:
    for number in range(12):
        await add_contact(spool, TEAM, {"email": f"p{number:02d}@example.org"}, NOW)
    await add_contact(spool, TEAM, {"email": "rare@example.org", "unsubscribed": True}, NOW)
    for number in range(12, 20):
        await add_contact(spool, TEAM, {"email": f"p{number:02d}@example.org"}, NOW)
    wanted = ContactFilter(unsubscribed=True)
    cut = await find_contacts(spool, TEAM, wanted, limit=5, budget=5)
    assert cut.contacts == [] and cut.partial and cut.examined == 5
    positions = [cut.after]
    found: list[str] = []
    page = cut
    while page.after is not None:
        page = await find_contacts(spool, TEAM, wanted, limit=5, after=page.after, budget=5)
        found += emails(page.contacts)
        positions.append(page.after)
    assert found == ["rare@example.org"]
    assert len(positions) == 5  # 21 contacts read 5 at a time
