"""The Emails page's queries over a real spool: index entries written and moved with their
records, filters by index and by record, date ranges as key ranges, paging both ways, and the
read budget that turns a rare match into a partial page with a cursor to continue."""

from __future__ import annotations

from dataclasses import replace

import pytest

from postwire import _core
from postwire._core import WriteBatch
from postwire.store.deliveries import EVENTS, EventRecord, add_event, event_key
from postwire.store.email_details import email_events
from postwire.store.email_index import TABLE, index_email_event, indexed_event_ids
from postwire.store.email_samples import SampleSender, sample_emails, seed_emails, uuid7_at
from postwire.store.email_search import EmailFilter, EmailPage, find_emails, id_floor
from postwire.store.emails import (
    EMAILS,
    EmailRecord,
    email_key,
    index_earlier_emails,
    record_last_event,
)
from postwire.store.spool import Spool

TEAM = "team-a"
OTHER = "team-b"
START_MS = 1_790_000_000_000  # 2026-09-21
HOUR_MS = 3_600_000
SENDERS = [
    SampleSender("dom-1", "one.test", ["key-1", "key-2"]),
    SampleSender("dom-2", "two.test", []),
]


async def seeded(spool: Spool, count: int = 300) -> list[EmailRecord]:
    """`count` emails of TEAM an hour apart (newest first), and as many of another team."""
    records = list(
        sample_emails(TEAM, SENDERS, count, start_ms=START_MS, end_ms=START_MS + count * HOUR_MS)
    )
    await seed_emails(spool, records, batch_size=100)
    await seed_emails(
        spool,
        sample_emails(
            OTHER, SENDERS, count, start_ms=START_MS, end_ms=START_MS + count * HOUR_MS, seed=2
        ),
    )
    return records[::-1]


async def walk_all(spool: Spool, wanted: EmailFilter, limit: int, budget: int = 2000) -> list[str]:
    """Every match, page by page towards older emails, partial pages included."""
    ids: list[str] = []
    page = await find_emails(spool, TEAM, wanted, limit=limit, budget=budget)
    while True:
        ids += [record.id for record in page.emails]
        if page.older is None:
            return ids
        page = await find_emails(spool, TEAM, wanted, limit=limit, after=page.older, budget=budget)


async def test_unfiltered_pages_walk_both_ways(spool: Spool) -> None:
    records = await seeded(spool)
    first = await find_emails(spool, TEAM, EmailFilter(), limit=50)
    assert [r.id for r in first.emails] == [r.id for r in records[:50]]
    assert first.newer is None and first.older == records[49].id and not first.partial
    second = await find_emails(spool, TEAM, EmailFilter(), limit=50, after=first.older)
    assert [r.id for r in second.emails] == [r.id for r in records[50:100]]
    back = await find_emails(spool, TEAM, EmailFilter(), limit=50, before=second.newer)
    assert [r.id for r in back.emails] == [r.id for r in records[:50]]
    assert back.newer is None  # the newest page again
    assert await walk_all(spool, EmailFilter(), 64) == [r.id for r in records]
    assert all(r.team_id == TEAM for r in first.emails)


@pytest.mark.parametrize(
    "wanted",
    [
        EmailFilter(status="bounced"),
        EmailFilter(domain_id="dom-2"),
        EmailFilter(api_key_id="key-1"),
        EmailFilter(status="delivered", domain_id="dom-1"),
        EmailFilter(search="grace"),
        EmailFilter(subject="RECEIPT"),
        EmailFilter(to="example.org", sender="one.test"),
        EmailFilter(tag="category=digest"),
        EmailFilter(tag="category"),
        EmailFilter(tag="nope"),
    ],
)
async def test_filters_match_the_records(spool: Spool, wanted: EmailFilter) -> None:
    records = await seeded(spool)
    expected = [r.id for r in records if wanted.matches(r)]
    assert await walk_all(spool, wanted, 20) == expected
    assert await walk_all(spool, wanted, 7, budget=25) == expected  # through partial pages


async def test_date_range_is_a_key_range(spool: Spool) -> None:
    records = await seeded(spool)
    since, until = START_MS + 100 * HOUR_MS, START_MS + 150 * HOUR_MS
    wanted = EmailFilter(since_ms=since, until_ms=until)
    expected = [r.id for r in records if id_floor(since) <= r.id < id_floor(until)]
    assert len(expected) == 50
    page = await find_emails(spool, TEAM, wanted, limit=30)
    assert [r.id for r in page.emails] == expected[:30]
    rest = await find_emails(spool, TEAM, wanted, limit=30, after=page.older)
    assert [r.id for r in rest.emails] == expected[30:] and rest.older is None
    newer = await find_emails(spool, TEAM, wanted, limit=30, before=rest.emails[0].id)
    assert [r.id for r in newer.emails] == expected[:30] and newer.newer is None
    status = replace(wanted, status="delivered")
    assert await walk_all(spool, status, 10) == [
        r.id for r in records if r.id in expected and r.last_event == "delivered"
    ]


async def test_budget_returns_a_partial_page_and_a_cursor(spool: Spool) -> None:
    records = await seeded(spool)
    page = await find_emails(spool, TEAM, EmailFilter(search="no such text"), limit=20, budget=100)
    assert page.emails == [] and page.partial and page.examined == 100
    assert page.older == records[99].id  # continue from the last record read
    last = await find_emails(
        spool, TEAM, EmailFilter(search="no such text"), limit=20, after=records[199].id, budget=100
    )
    assert last.older is None and not last.partial  # the walk ended within the budget


async def test_status_index_follows_last_event(spool: Spool) -> None:
    records = await seeded(spool, 100)
    sent_one = next(r for r in records if r.last_event == "sent")
    batch = WriteBatch()
    record_last_event(batch, sent_one, "delivered")
    await spool.commit(batch)
    delivered = await find_emails(spool, TEAM, EmailFilter(status="delivered"), limit=100)
    assert sent_one.id in [r.id for r in delivered.emails]
    assert sent_one.id not in [
        r.id for r in (await find_emails(spool, TEAM, EmailFilter(status="sent"), limit=100)).emails
    ]
    current = EMAILS.get(spool, email_key(TEAM, sent_one.id))
    assert current is not None and current.last_event == "delivered"
    # A milder event after a bounce changes neither the record nor its index entry.
    batch = WriteBatch()
    bounced_record = record_last_event(batch, current, "bounced")
    await spool.commit(batch)
    batch = WriteBatch()
    assert record_last_event(batch, bounced_record, "opened") is bounced_record
    assert len(batch) == 0
    entries = spool.scan(TABLE, prefix=f"s/{TEAM}/".encode(), limit=1000)
    assert sum(1 for key, _ in entries if key.decode().endswith(sent_one.id)) == 1


async def test_event_index_lists_an_emails_events(spool: Spool) -> None:
    batch = WriteBatch()
    ids = [_core.new_id() for _ in range(3)]
    for event_id in ids:
        index_email_event(batch, TEAM, "email-1", event_id)
    index_email_event(batch, TEAM, "email-2", _core.new_id())
    await spool.commit(batch)
    assert indexed_event_ids(spool, TEAM, "email-1", 100) == ids


def test_uuid7_at_sorts_by_time() -> None:
    import random

    rng = random.Random(1)
    made = [uuid7_at(START_MS + n, rng) for n in range(100)]
    assert made == sorted(made)
    assert all(id_floor(START_MS + n) < made[n] < id_floor(START_MS + n + 1) for n in range(100))
    assert _core.new_id()[14] == made[0][14] == "7"


def test_page_type_is_plain() -> None:
    assert EmailPage([], None, None).partial is False


async def test_emails_kept_before_the_index_get_their_entries_once(spool: Spool) -> None:
    records = list(
        sample_emails(TEAM, SENDERS, 30, start_ms=START_MS, end_ms=START_MS + 30 * HOUR_MS)
    )
    batch = WriteBatch()
    for record in records:  # as an earlier version wrote them: records alone
        EMAILS.put(batch, email_key(TEAM, record.id), record)
    await spool.commit(batch)
    assert (await find_emails(spool, TEAM, EmailFilter(domain_id="dom-2"), limit=100)).emails == []
    assert await index_earlier_emails(spool) == 30
    expected = [r.id for r in records[::-1] if r.domain_id == "dom-2"]
    assert [
        r.id
        for r in (await find_emails(spool, TEAM, EmailFilter(domain_id="dom-2"), limit=100)).emails
    ] == expected
    assert await index_earlier_emails(spool) == 0  # done once


@pytest.mark.parametrize(
    ("wanted", "found"),
    [
        (EmailFilter(search="ÜNÏ"), True),  # not ASCII: checked on the decoded record
        (EmailFilter(subject='say "hi"'), True),  # JSON escapes quotes: no byte prefilter
        (EmailFilter(search="back\\slash"), True),
        (EmailFilter(tag='q"t=v\\1'), True),  # tags as orjson writes them
        (EmailFilter(tag='q"t=v'), False),
        (EmailFilter(tag="q"), False),
        (EmailFilter(status="delivered", tag='q"t'), True),
        (EmailFilter(status="bounced", search="ünï"), False),
    ],
)
async def test_texts_json_escapes_and_non_ascii_still_match(
    spool: Spool, wanted: EmailFilter, found: bool
) -> None:
    (record,) = sample_emails(TEAM, SENDERS, 1, start_ms=START_MS, end_ms=START_MS + 1)
    odd = replace(
        record,
        subject='Ünïcode, say "hi", back\\slash',
        tags=[{"name": 'q"t', "value": "v\\1"}],
        last_event="delivered",
    )
    await seed_emails(spool, [odd])
    page = await find_emails(spool, TEAM, wanted, limit=10)
    assert [r.id for r in page.emails] == ([odd.id] if found else [])


async def test_an_emails_events_through_its_index_or_a_walk_of_the_teams(spool: Spool) -> None:
    (mine, other) = sample_emails(TEAM, SENDERS, 2, start_ms=START_MS, end_ms=START_MS + 2)
    await seed_emails(spool, [mine, other])
    batch = WriteBatch()
    indexed = [add_event(batch, TEAM, mine.id, "email.sent", START_MS).id]
    add_event(batch, TEAM, other.id, "email.sent", START_MS)
    await spool.commit(batch)
    found = email_events(spool, mine)
    assert [e.id for e in found.events] == indexed and found.complete
    # Events kept before the event index: found by walking the team's events since the email.
    (earlier,) = sample_emails(TEAM, SENDERS, 1, start_ms=START_MS, end_ms=START_MS + 1, seed=9)
    assert email_events(spool, earlier).events == []
    batch = WriteBatch()
    unindexed = EventRecord(_core.new_id(), "email.sent", START_MS, TEAM, earlier.id, {})
    EVENTS.put(batch, event_key(TEAM, unindexed.id), unindexed)
    await spool.commit(batch)
    walked = email_events(spool, earlier)
    assert [e.id for e in walked.events] == [unindexed.id] and walked.complete
