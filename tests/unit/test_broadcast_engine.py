"""The broadcast engine over a real spool, without a server: what the walk does with each
member, how a cancel stops it, and how it waits while its domain is not verified."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from postwire import _core
from postwire._core import WriteBatch
from postwire.broadcasts import engine as engine_module
from postwire.broadcasts.engine import RETRY_SECONDS, BroadcastEngine
from postwire.config import load_config
from postwire.domains.store import new_domain_record, save_domain
from postwire.store.broadcasts import (
    CONTACT_OUTCOMES,
    BroadcastRecord,
    broadcast_counts,
    due_entries,
    get_broadcast,
    put_broadcast,
    set_due,
)
from postwire.store.contacts import CONTACTS, ContactRecord, contact_key, put_contact
from postwire.store.deliveries import SUPPRESSIONS, new_suppression, suppression_key
from postwire.store.emails import EMAILS
from postwire.store.segments import SegmentRecord, put_segment
from postwire.store.spool import Spool
from postwire.store.topics import TopicRecord, put_topic

TEAM = "01a21000-0000-7000-8000-000000000001"
STAMP = "2026-11-25 10:00:00.123000+00"
NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def engine(spool: Spool, tmp_path: Path, page_size: int = 7) -> BroadcastEngine:
    config = load_config(
        None,
        {
            "POSTWIRE_DATA_DIR": str(tmp_path),
            "POSTWIRE_BROADCASTS_PAGE_SIZE": str(page_size),
            "POSTWIRE_BROADCASTS_RATE": "100000",
        },
    )
    return BroadcastEngine(config, spool, now=lambda: NOW)


async def verified_domain(spool: Spool, tmp_path: Path) -> None:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    domain = await new_domain_record(
        spool, config, TEAM, "example.com", region="us-east-1", custom_return_path="send",
        open_tracking=False, click_tracking=False, tls="opportunistic",
        capabilities={"sending": "enabled", "receiving": "disabled"}, tracking_subdomain=None,
    )  # fmt: skip
    await save_domain(spool, replace(domain, status="verified"))


async def audience(spool: Spool, members: int) -> tuple[str, str, list[ContactRecord]]:
    """A segment of `members` contacts (and a topic): 0 is unsubscribed, 1 opted out of the
    topic, 2 suppressed, 3 at an address Postwire cannot send to; 4's record is gone."""
    segment = SegmentRecord(_core.new_id(), TEAM, "All", STAMP)
    topic = TopicRecord(_core.new_id(), TEAM, "News", None, "opt_in", "public", STAMP)
    batch = WriteBatch()
    put_segment(batch, segment)
    put_topic(batch, topic)
    await spool.commit(batch)
    contacts = []
    batch = WriteBatch()
    for number in range(members):
        contact = ContactRecord(
            _core.new_id(), TEAM, f"m{number}@example.org", f"Ann{number}", None,
            unsubscribed=number == 0, created_at=STAMP, updated_at=STAMP,
            segment_ids=[segment.id], topics={topic.id: "opt_out"} if number == 1 else {},
        )  # fmt: skip
        if number == 3:
            contact = replace(contact, email="m3@printer.local")
        put_contact(batch, spool, None, contact, 0, event=None)
        contacts.append(contact)
    address = contacts[2].email
    SUPPRESSIONS.put(batch, suppression_key(TEAM, address), new_suppression(address, "manual", 0))
    await spool.commit(batch)
    batch = WriteBatch()
    CONTACTS.delete(batch, contact_key(TEAM, contacts[4].id))  # its member row stays
    await spool.commit(batch)
    return segment.id, topic.id, contacts


async def queued_broadcast(spool: Spool, segment_id: str, topic_id: str | None) -> str:
    record = BroadcastRecord(
        _core.new_id(), TEAM, segment_id, "News <news@example.com>", "Hi {{{FIRST_NAME}}}",
        STAMP, status="queued", text="Hello {{{contact.first_name}}}", topic_id=topic_id,
        due_at_ms=1,
    )  # fmt: skip
    batch = WriteBatch()
    set_due(batch, replace(record, due_at_ms=None), 1)
    put_broadcast(batch, record)
    await spool.commit(batch)
    return record.id


def outcomes(spool: Spool, broadcast_id: str) -> Counter[str]:
    rows = CONTACT_OUTCOMES.scan(spool, prefix=f"{TEAM}/{broadcast_id}/contact/", limit=10_000)
    return Counter(outcome.status for _, outcome in rows)


async def test_a_walk_mails_each_member_once_and_counts_every_skip(
    spool: Spool, tmp_path: Path
) -> None:
    await verified_domain(spool, tmp_path)
    segment_id, topic_id, contacts = await audience(spool, 30)
    broadcast_id = await queued_broadcast(spool, segment_id, topic_id)
    walker = engine(spool, tmp_path)
    assert await walker.take_turns()
    assert not await walker.take_turns()  # nothing due any more

    record = get_broadcast(spool, TEAM, broadcast_id)
    assert record is not None
    assert (record.status, record.due_at_ms, record.cursor) == ("sent", None, contacts[-1].id)
    assert record.sent_at is not None and record.finished_at is not None
    assert due_entries(spool, limit=10) == []
    assert outcomes(spool, broadcast_id) == {
        "queued": 25, "skipped_unsubscribed": 1, "skipped_topic": 1, "suppressed": 1, "failed": 1,
    }  # fmt: skip
    counts = broadcast_counts(spool, TEAM, broadcast_id)
    assert (counts["queued"], counts["skipped_unsubscribed"], counts["skipped_topic"]) == (25, 1, 1)
    assert (counts["suppressed"], counts["failed"]) == (1, 1)
    emails = [e for _, e in EMAILS.scan(spool, prefix=f"{TEAM}/", limit=100)]
    assert sorted(e.to[0] for e in emails) == sorted(c.email for c in contacts[5:])
    assert all(e.broadcast_id == broadcast_id and e.html is None for e in emails)
    assert {e.subject for e in emails} == {f"Hi Ann{n}" for n in range(5, 30)}


async def test_a_cancel_between_pages_stops_the_walk(
    spool: Spool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PAGES_A_TURN", 2)
    await verified_domain(spool, tmp_path)
    segment_id, _, _ = await audience(spool, 30)
    broadcast_id = await queued_broadcast(spool, segment_id, None)
    walker = engine(spool, tmp_path, page_size=5)
    await walker.take_turns()  # two pages: 10 members, 6 mailed (0 to 4 skipped or failed)
    record = get_broadcast(spool, TEAM, broadcast_id)
    assert record is not None and record.status == "sending"
    assert broadcast_counts(spool, TEAM, broadcast_id)["queued"] == 6

    batch = WriteBatch()  # as POST /broadcasts/{id}/cancel does
    set_due(batch, record, None)
    put_broadcast(batch, replace(record, status="canceled", due_at_ms=None))
    await spool.commit(batch)
    assert not await walker.take_turns()
    assert broadcast_counts(spool, TEAM, broadcast_id)["queued"] == 6
    assert sum(outcomes(spool, broadcast_id).values()) == 9  # 10 walked, one record gone


async def test_a_broadcast_waits_while_its_domain_is_not_verified(
    spool: Spool, tmp_path: Path
) -> None:
    segment_id, _, _ = await audience(spool, 6)
    broadcast_id = await queued_broadcast(spool, segment_id, None)
    walker = engine(spool, tmp_path)
    assert await walker.take_turns()
    record = get_broadcast(spool, TEAM, broadcast_id)
    assert record is not None and record.status == "queued"
    retry_at = int(NOW.timestamp() * 1000 + RETRY_SECONDS * 1000)
    assert [at for at, _ in due_entries(spool, limit=10)] == [retry_at] == [record.due_at_ms]
    assert broadcast_counts(spool, TEAM, broadcast_id)["queued"] == 0


async def test_a_page_made_before_an_edit_is_dropped_and_made_again(
    spool: Spool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await verified_domain(spool, tmp_path)
    segment_id, _, _ = await audience(spool, 8)
    broadcast_id = await queued_broadcast(spool, segment_id, None)
    walker = engine(spool, tmp_path, page_size=100)
    prepare_page = walker._prepare_page
    edited = False

    async def edit_while_preparing(*args: object) -> object:
        nonlocal edited
        page = await prepare_page(*args)  # type: ignore[arg-type]
        if not edited:  # the API's PATCH lands before the page commits
            edited = True
            record = get_broadcast(spool, TEAM, broadcast_id)
            assert record is not None
            batch = WriteBatch()
            put_broadcast(batch, replace(record, subject="Edited {{{FIRST_NAME}}}"))
            await spool.commit(batch)
        return page

    monkeypatch.setattr(walker, "_prepare_page", edit_while_preparing)
    await walker.take_turns()
    assert broadcast_counts(spool, TEAM, broadcast_id)["queued"] == 0
    await walker.take_turns()
    emails = [e for _, e in EMAILS.scan(spool, prefix=f"{TEAM}/", limit=100)]
    assert {e.subject for e in emails} == {f"Edited Ann{n}" for n in (1, 5, 6, 7)}
