"""A pass of the insights service reads its emails' state together: whether each has insights
already, then each one's message, with the reads waiting at once, so that on a table store on
the network they leave as one statement (`RequestsTogether`) instead of one round trip after
another. The spool is a real one; its parked reads are made to wait a few scheduling rounds,
as they do on the network."""

from __future__ import annotations

from pathlib import Path

from postwire import _core
from postwire._core import WriteBatch
from postwire.insights.reading import read_email_insights
from postwire.store.email_insights import keep_body
from postwire.store.emails import put_new_email
from postwire.store.spool import Spool
from tests.unit.insights.test_recipients import TEAM, email_to
from tests.unit.insights.test_table_reads import MESSAGE, tail_of
from tests.unit.test_fan_out_reads import Overlap

EMAILS_IN_PASS = 40


async def test_a_pass_reads_its_emails_state_and_messages_waiting_together(
    spool: Spool, tmp_path: Path
) -> None:
    records = [email_to(f"r{n}@example.org", _core.new_id()) for n in range(EMAILS_IN_PASS)]
    batch = WriteBatch()
    for record in records:
        put_new_email(batch, record)
        keep_body(batch, TEAM, record.id, MESSAGE)
    await spool.commit(batch)
    tail = tail_of(spool, tmp_path)
    overlap = Overlap(spool)

    await tail.follow_team(TEAM)

    assert overlap.most_waiting > EMAILS_IN_PASS // 2
    for record in records:
        found = read_email_insights(spool, TEAM, record.id)
        assert found is not None, record.id
