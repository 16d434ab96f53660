"""The emails' recipient index over a real spool: an entry per envelope recipient (to, cc,
bcc; any case) written with the email's record, read newest first for a contact's page, kept
apart per team, and given to emails kept before it by the start-up indexing pass."""

from __future__ import annotations

from dataclasses import replace

from postwire._core import WriteBatch
from postwire.store.email_index import TABLE, emails_sent_to
from postwire.store.email_samples import SampleSender, sample_emails, seed_emails
from postwire.store.emails import EMAILS, EmailRecord, email_key, index_earlier_emails
from postwire.store.spool import Spool

TEAM = "team-a"
OTHER = "team-b"
START_MS = 1_790_000_000_000
SENDERS = [SampleSender("dom-1", "one.test", ["key-1"])]


def samples(team: str, count: int, seed: int = 15) -> list[EmailRecord]:
    end_ms = START_MS + count * 1000
    return list(sample_emails(team, SENDERS, count, start_ms=START_MS, end_ms=end_ms, seed=seed))


async def test_each_recipient_finds_its_emails_newest_first(spool: Spool) -> None:
    records = samples(TEAM, 6)
    records[1] = replace(records[1], recipients=["Ann@Example.org", "bob@example.org"])
    records[3] = replace(records[3], recipients=["carl@example.org", "ann@example.org"])
    records[4] = replace(records[4], recipients=["joann@example.org"])
    await seed_emails(spool, records)
    theirs = [replace(r, recipients=["ann@example.org"]) for r in samples(OTHER, 2, seed=3)]
    await seed_emails(spool, theirs)

    assert emails_sent_to(spool, TEAM, "ANN@example.org", 10) == [records[3].id, records[1].id]
    assert emails_sent_to(spool, TEAM, "ann@example.org", 1) == [records[3].id]
    assert emails_sent_to(spool, TEAM, "bob@example.org", 10) == [records[1].id]
    assert emails_sent_to(spool, TEAM, "nobody@example.org", 10) == []
    assert emails_sent_to(spool, OTHER, "ann@example.org", 10) == [r.id for r in theirs[::-1]]


async def test_emails_indexed_before_the_recipient_entries_get_them_at_start(
    spool: Spool,
) -> None:
    records = [replace(r, recipients=["ann@example.org"]) for r in samples(TEAM, 5)]
    batch = WriteBatch()
    for record in records:  # as an earlier version wrote them: records, and its mark
        EMAILS.put(batch, email_key(TEAM, record.id), record)
    batch.put(TABLE, b"indexed/v1", b"1")
    await spool.commit(batch)
    assert emails_sent_to(spool, TEAM, "ann@example.org", 10) == []
    assert await index_earlier_emails(spool) == 5
    assert emails_sent_to(spool, TEAM, "ann@example.org", 10) == [r.id for r in records[::-1]]
    assert await index_earlier_emails(spool) == 0
