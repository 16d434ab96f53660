"""The table reads of one email's insights: each key read once, parked, never blocking (on a
table store on the network a blocking read stalls every task of the process for a round
trip), and the sandbox inbox looked in only in sandbox mode. The spool is a real one;
`record_reads` wraps its facade."""

from __future__ import annotations

from pathlib import Path

from postwire import _core
from postwire._core import WriteBatch
from postwire.config import Config
from postwire.domains.verification import build_resolver
from postwire.insights.email_checks import EmailChecker
from postwire.insights.reading import read_email_insights
from postwire.insights.service import InsightsTail
from postwire.store.email_insights import keep_body, kept_body, kept_body_key
from postwire.store.emails import add_email, put_new_email, record_last_event
from postwire.store.sandbox_inbox import held_source, hold_message
from postwire.store.spool import Spool
from tests.table_reads import record_reads
from tests.unit.insights.test_recipients import TEAM, email_to

MESSAGE = (
    b"From: shop@example.net\r\nTo: ann@example.org\r\nSubject: S\r\n"
    b"Content-Type: text/plain\r\n\r\nYour order shipped.\r\n"
)
# The tables an email's insights read besides its own record and insights.
WATCHED = ("insights_due", "sandbox_inbox", "email_index", "suppressions")


def tail_of(spool: Spool, tmp_path: Path, *, sandbox: bool = False) -> InsightsTail:
    """The insights service's tail; `email_to`'s domain does not exist, so no DNS is asked."""
    config = Config(data_dir=tmp_path, sandbox=sandbox)
    checker = EmailChecker(config, spool, build_resolver(config), spool.clock_ms)
    return InsightsTail(config, spool, checker)


async def insights_codes(spool: Spool, tail: InsightsTail, email_id: str) -> set[str]:
    await tail.follow_team(TEAM)
    found = read_email_insights(spool, TEAM, email_id)
    assert found is not None, "no insights computed"
    return {insight.code for insight in found.insights}


async def test_a_delivered_email_without_a_copy_is_looked_for_once(
    spool: Spool, tmp_path: Path
) -> None:
    earlier = email_to("ann@example.org", _core.new_id())
    record = email_to("ann@example.org", _core.new_id())
    batch = WriteBatch()
    put_new_email(batch, earlier)
    record_last_event(batch, earlier, "bounced")
    put_new_email(batch, record)  # delivered: its message left the queue, no copy was kept
    await spool.commit(batch)
    tail = tail_of(spool, tmp_path)
    reads = record_reads(spool, WATCHED)

    codes = await insights_codes(spool, tail, record.id)

    assert {"content_not_checked", "recipient_bounced_recently"} <= codes
    body_key = kept_body_key(TEAM, record.id)
    assert [read.how for read in reads if read.key == body_key] == ["aget"]
    assert not [read for read in reads if read.table == "sandbox_inbox"]
    # The recipient's history (suppression, earlier emails, their statuses) is read parked.
    history = [read for read in reads if read.table in ("email_index", "suppressions")]
    assert {read.how for read in history} == {"aget", "ascan"}


async def test_a_kept_copy_is_read_once_and_dropped_with_the_insights(
    spool: Spool, tmp_path: Path
) -> None:
    record = email_to("ann@example.org", _core.new_id())
    batch = WriteBatch()
    put_new_email(batch, record)
    keep_body(batch, TEAM, record.id, MESSAGE)
    await spool.commit(batch)
    tail = tail_of(spool, tmp_path)
    reads = record_reads(spool, WATCHED)

    codes = await insights_codes(spool, tail, record.id)

    assert "content_not_checked" not in codes  # judged by the copy's text
    body_key = kept_body_key(TEAM, record.id)
    assert [read.how for read in reads if read.key == body_key] == ["aget"]
    assert kept_body(spool, TEAM, record.id) is None


async def test_a_queued_email_looks_for_a_copy_kept_meanwhile(spool: Spool, tmp_path: Path) -> None:
    record = email_to("ann@example.org", _core.new_id())
    batch = WriteBatch()
    now_ms = spool.clock_ms()
    add_email(batch, record, MESSAGE, now_ms + 3_600_000, now_ms)
    await spool.commit(batch)
    tail = tail_of(spool, tmp_path)
    reads = record_reads(spool, WATCHED)

    assert "content_not_checked" not in await insights_codes(spool, tail, record.id)
    # Read from the queue; a delivery may have kept a copy since, so that is read once after.
    body_key = kept_body_key(TEAM, record.id)
    assert [read.how for read in reads if read.key == body_key] == ["aget"]


async def test_the_sandbox_reads_its_held_message_parked(spool: Spool, tmp_path: Path) -> None:
    record = email_to("ann@example.org", _core.new_id())
    now_ms = spool.clock_ms()
    batch = WriteBatch()
    add_email(batch, record, MESSAGE, now_ms, now_ms)
    await spool.commit(batch)
    batch = WriteBatch()  # as the sandbox's delivery does: the message moves to the inbox
    hold_message(batch, spool, TEAM, record.id, record.envelope_from, record.recipients, now_ms)
    batch.remove(record.id, now_ms)
    await spool.commit(batch)
    assert held_source(spool, TEAM, record.id) == MESSAGE
    tail = tail_of(spool, tmp_path, sandbox=True)
    reads = record_reads(spool, WATCHED)

    assert "content_not_checked" not in await insights_codes(spool, tail, record.id)
    inbox = [read for read in reads if read.table == "sandbox_inbox"]
    assert [read.how for read in inbox] == ["aget"]
