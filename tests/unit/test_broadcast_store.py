"""The broadcast tables over a real spool: the due index, counts kept with events, and the
recipient rows the API lists."""

from __future__ import annotations

from dataclasses import replace

from postwire import _core
from postwire.store.broadcasts import (
    RECIPIENT_ROWS,
    BroadcastRecord,
    ContactOutcome,
    RecipientRow,
    add_contact_outcome,
    broadcast_counts,
    count_email_event,
    count_engagement,
    count_unsubscribe,
    delete_broadcast,
    due_entries,
    get_broadcast,
    get_contact_outcome,
    link_counts,
    link_id,
    put_broadcast,
    recipient_rows_page,
    recipients_prefix,
    set_due,
)
from postwire.store.deliveries import add_event
from postwire.store.spool import Spool

TEAM = "0190a000-0000-7000-8000-000000000001"
BID = "0190a000-0000-7000-8000-0000000000b1"
EMAIL_ID = "0190a000-0000-7000-8000-0000000000e1"
CONTACT = "0190a000-0000-7000-8000-0000000000c1"


def record(**changes: object) -> BroadcastRecord:
    base = BroadcastRecord(BID, TEAM, "seg", "a@example.com", "Hi", "2026-01-01 00:00:00.000000+00")
    return replace(base, **changes)  # type: ignore[arg-type]


async def commit(spool: Spool, *writes: object) -> None:
    batch = _core.WriteBatch()
    for write in writes:
        write(batch)  # type: ignore[operator]
    await spool.commit(batch)


async def test_the_due_index_follows_the_record(spool: Spool) -> None:
    draft = record()
    await commit(spool, lambda b: put_broadcast(b, draft))
    assert due_entries(spool, limit=10) == []

    batch = _core.WriteBatch()
    set_due(batch, draft, 2_000)
    scheduled = replace(draft, status="scheduled", due_at_ms=2_000)
    put_broadcast(batch, scheduled)
    other = record(id="0190a000-0000-7000-8000-0000000000b2", status="queued", due_at_ms=1_000)
    set_due(batch, replace(other, due_at_ms=None), 1_000)
    put_broadcast(batch, other)
    await spool.commit(batch)
    due = due_entries(spool, limit=10)
    assert [(at, entry.broadcast_id) for at, entry in due] == [(1_000, other.id), (2_000, BID)]

    batch = _core.WriteBatch()
    set_due(batch, scheduled, 500)  # moved: the old entry goes
    await spool.commit(batch)
    assert [at for at, _ in due_entries(spool, limit=10)] == [500, 1_000]

    batch = _core.WriteBatch()
    delete_broadcast(batch, replace(scheduled, due_at_ms=500))
    await spool.commit(batch)
    assert get_broadcast(spool, TEAM, BID) is None
    assert [at for at, _ in due_entries(spool, limit=10)] == [1_000]


async def test_events_of_a_broadcast_email_are_counted_in_their_commit(spool: Spool) -> None:
    batch = _core.WriteBatch()
    add_contact_outcome(batch, TEAM, BID, CONTACT, ContactOutcome("a@x.org", "queued", EMAIL_ID))
    add_contact_outcome(batch, TEAM, BID, "c2", ContactOutcome("b@x.org", "suppressed"))
    add_event(batch, TEAM, EMAIL_ID, "email.sent", 1, broadcast_id=BID)
    add_event(batch, TEAM, EMAIL_ID, "email.delivered", 1, broadcast_id=BID, to="a@x.org")
    bounce = {"type": "Permanent", "subType": "General", "message": "", "diagnosticCode": []}
    add_event(batch, TEAM, "e2", "email.bounced", 1, broadcast_id=BID, to="c@x.org", bounce=bounce)
    add_event(batch, TEAM, "e3", "email.delivered", 1, to="d@x.org")  # not a broadcast's
    await spool.commit(batch)
    counts = broadcast_counts(spool, TEAM, BID)
    assert (counts["sent"], counts["delivered"], counts["bounced"], counts["opened"]) == (
        1,
        1,
        1,
        0,
    )
    outcome = get_contact_outcome(spool, TEAM, BID, CONTACT)
    assert outcome == ContactOutcome("a@x.org", "queued", EMAIL_ID)
    sent, more = recipient_rows_page(spool, TEAM, BID, "sent", after=None, before=None, limit=5)
    assert (sent, more) == ([(CONTACT, RecipientRow("a@x.org", CONTACT))], False)
    suppressed = RECIPIENT_ROWS.scan(spool, prefix=recipients_prefix(TEAM, BID, "suppressed"))
    assert [row.email for _, row in suppressed] == ["b@x.org"]
    bounced = RECIPIENT_ROWS.scan(spool, prefix=recipients_prefix(TEAM, BID, "bounced"))
    assert [(row.email, row.bounce_type) for _, row in bounced] == [("c@x.org", "permanent")]


async def test_opens_and_clicks_count_recipients_and_links_count_clicks(spool: Spool) -> None:
    url, other = "https://example.com/a", "https://example.com/b"
    for kind, link in [
        ("opened", None), ("opened", None), ("clicked", url), ("clicked", url),
        ("clicked", other),
    ]:  # fmt: skip
        batch = _core.WriteBatch()
        count_engagement(batch, spool, TEAM, BID, EMAIL_ID, "a@x.org", kind, link)
        await spool.commit(batch)
    batch = _core.WriteBatch()
    count_engagement(batch, spool, TEAM, BID, "e2", "b@x.org", "clicked", url)
    await spool.commit(batch)
    counts = broadcast_counts(spool, TEAM, BID)
    assert (counts["opened"], counts["clicked"]) == (1, 2)
    assert link_counts(spool, TEAM, BID, link_id(url)) == (3, 2)
    assert link_counts(spool, TEAM, BID, link_id(other)) == (1, 1)
    opened = RECIPIENT_ROWS.get(spool, recipients_prefix(TEAM, BID, "opened") + EMAIL_ID)
    assert opened is not None and opened.count == 2
    clicked = RECIPIENT_ROWS.get(spool, recipients_prefix(TEAM, BID, "clicked") + EMAIL_ID)
    assert clicked is not None and (clicked.count, clicked.links) == (3, {url: 2, other: 1})


async def test_unsubscribes_are_counted_under_the_key_the_page_adds_to(spool: Spool) -> None:
    await commit(spool, lambda b: count_unsubscribe(b, TEAM, BID, CONTACT, "a@x.org"))
    assert broadcast_counts(spool, TEAM, BID)["unsubscribed"] == 1
    assert spool.counter("counters", f"broadcast/{TEAM}/{BID}/unsubscribed".encode()) == 1


def test_a_delivery_event_without_a_broadcast_counts_nothing() -> None:
    batch = _core.WriteBatch()
    count_email_event(batch, TEAM, BID, EMAIL_ID, "email.opened", {})
    assert len(batch) == 0


async def test_recipient_pages_walk_newest_first_with_cursors_and_filters(spool: Spool) -> None:
    batch = _core.WriteBatch()
    ids = [f"0190a000-0000-7000-8000-0000000001{n:02d}" for n in range(12)]
    for n, email_id in enumerate(ids):
        add_event(batch, TEAM, email_id, "email.delivered", 1, broadcast_id=BID, to=f"r{n}@x.org")
    await spool.commit(batch)

    def page(**cursor: str | None) -> tuple[list[str], bool]:
        args = {"after": None, "before": None, **cursor}
        rows, more = recipient_rows_page(spool, TEAM, BID, "delivered", limit=5, **args)
        return [row_id for row_id, _ in rows], more

    assert page() == (ids[::-1][:5], True)
    assert page(after=ids[7]) == (ids[::-1][5:10], True)
    assert page(after=ids[2]) == (ids[1::-1], False)
    assert page(before=ids[2]) == (ids[7:2:-1], True)
    odd, more = recipient_rows_page(
        spool, TEAM, BID, "delivered", after=None, before=None, limit=5,
        keep=lambda row: row.email in ("r1@x.org", "r11@x.org"),
    )  # fmt: skip
    assert ([row.email for _, row in odd], more) == (["r11@x.org", "r1@x.org"], False)
