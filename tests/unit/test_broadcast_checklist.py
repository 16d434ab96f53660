"""The checklist before a broadcast is sent from the dashboard, the addresses of a test send,
and the shared changes of `broadcasts.drafts`, over a real spool without a server."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from postwire._core import WriteBatch
from postwire.accept import Acceptor
from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.checks import Check
from postwire.broadcasts.blocks.document import empty_document
from postwire.broadcasts.checklist import blocking, html_checks, send_checklist
from postwire.broadcasts.drafts import BroadcastDrafts, looks_like_id
from postwire.broadcasts.proof_sends import MAX_PROOF_RECIPIENTS, parse_proof_recipients
from postwire.config import load_config
from postwire.domains.store import new_domain_record, save_domain
from postwire.errors import ApiError
from postwire.store.broadcast_documents import DocumentRecord, get_document, put_document
from postwire.store.broadcasts import BroadcastRecord, due_entries, put_broadcast
from postwire.store.contacts import ContactRecord, put_contact
from postwire.store.segments import SegmentRecord, put_segment
from postwire.store.spool import Spool

TEAM = "01a21000-0000-7000-8000-0000000000b2"
SEGMENT = "01a21000-0000-7000-8000-0000000000c1"
EMPTY_SEGMENT = "01a21000-0000-7000-8000-0000000000c2"
BROADCAST = "01a21000-0000-7000-8000-0000000000d1"
STAMP = "2026-11-25 10:00:00.123000+00"
NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
HTML = '<p>Hi</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>'


def codes(checks: list[Check]) -> dict[str, bool]:
    return {check.code: check.passed for check in checks}


def test_html_from_the_api_is_checked_for_unsubscribe_alt_text_and_links() -> None:
    good = html_checks(
        HTML + '<img src="https://example.com/a.png" alt="A cat"><a href="#top">Top</a>'
        '<a href="mailto:hi@example.com">Mail</a><a href="{{{contact.site}}}">Yours</a>'
    )
    assert codes(good) == {"unsubscribe_link": True, "image_alt": True, "links_valid": True}
    bad = html_checks(
        '<img src="x.png"><img src="y.png" alt=" "><a href="javascript:alert(1)">x</a>'
    )
    assert codes(bad) == {"unsubscribe_link": False, "image_alt": False, "links_valid": False}
    messages = [check.message for check in bad]
    assert "2 images have no alt text" in messages[1]
    assert "javascript:alert(1)" in messages[2]


def test_proof_addresses_are_split_deduplicated_and_limited() -> None:
    assert parse_proof_recipients(" a@example.com,b@example.com;\na@example.com ") == [
        "a@example.com",
        "b@example.com",
    ]
    for raw, words in (
        ("", "at least one address"),
        (",".join(f"t{n}@example.com" for n in range(MAX_PROOF_RECIPIENTS + 1)), "at most 5"),
        ("someone", "someone:"),
    ):
        with pytest.raises(ApiError) as refused:
            parse_proof_recipients(raw)
        assert words in refused.value.message


async def world(spool: Spool, tmp_path: Path, *, members: int) -> BroadcastRecord:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    domain = await new_domain_record(
        spool, config, TEAM, "example.com", region="us-east-1", custom_return_path="send",
        open_tracking=False, click_tracking=False, tls="opportunistic",
        capabilities={"sending": "enabled", "receiving": "disabled"}, tracking_subdomain=None,
    )  # fmt: skip
    await save_domain(spool, replace(domain, status="verified"))
    batch = WriteBatch()
    put_segment(batch, SegmentRecord(SEGMENT, TEAM, "Readers", STAMP))
    put_segment(batch, SegmentRecord(EMPTY_SEGMENT, TEAM, "Nobody", STAMP))
    await spool.commit(batch)
    batch = WriteBatch()
    for number in range(members):
        contact = ContactRecord(
            id=f"01a21000-0000-7000-8000-00000000{number:04d}",
            team_id=TEAM,
            email=f"m{number}@example.org",
            first_name=None,
            last_name=None,
            unsubscribed=False,
            created_at=STAMP,
            updated_at=STAMP,
            segment_ids=[SEGMENT],
        )
        put_contact(batch, spool, None, contact, 0, event=None, segments_found=[SEGMENT])
    record = BroadcastRecord(
        BROADCAST, TEAM, SEGMENT, "News <news@example.com>", "Hello", STAMP, html=HTML
    )
    put_broadcast(batch, record)
    await spool.commit(batch)
    return record


async def test_sending_items_need_a_subject_a_verified_domain_and_members(
    spool: Spool, tmp_path: Path
) -> None:
    record = await world(spool, tmp_path, members=2)
    checks = await send_checklist(spool, record, BrandKit.default())
    assert blocking(checks) == []
    assert "The segment Readers has 2 contacts." in [check.message for check in checks]
    worse = replace(record, subject=" ", sender="news@elsewhere.example", segment_id=EMPTY_SEGMENT)
    failing = {
        check.code: check.message
        for check in blocking(await send_checklist(spool, worse, BrandKit.default()))
    }
    assert failing == {
        "subject": "Write a subject in the editor.",
        "from_domain": "The domain elsewhere.example is not verified: verify it on the "
        "Domains page first.",
        "segment": "The segment Nobody has no contacts.",
    }
    assert (
        codes(await send_checklist(spool, replace(record, segment_id=""), BrandKit.default()))[
            "segment"
        ]
        is False
    )


async def test_html_gmail_will_clip_is_a_warning_that_does_not_block(
    spool: Spool, tmp_path: Path
) -> None:
    record = await world(spool, tmp_path, members=1)
    checks = await send_checklist(spool, record, BrandKit.default())
    (fits,) = [check for check in checks if check.code == "html_size"]
    assert fits.passed and "under Gmail's 102 KB clip" in fits.message
    long = replace(record, html=HTML + "<p>" + "word " * 22_000 + "</p>")
    checks = await send_checklist(spool, long, BrandKit.default())
    (clipped,) = [check for check in checks if check.code == "html_size"]
    assert not clipped.passed and not clipped.blocks_sending
    assert clipped.message.startswith("The HTML is 107 KB: Gmail clips emails over 102 KB")
    assert blocking(checks) == []
    text_only = replace(record, html=None, text="Hello")
    assert "html_size" not in codes(await send_checklist(spool, text_only, BrandKit.default()))


async def test_a_document_is_checked_by_its_own_content_checks(
    spool: Spool, tmp_path: Path
) -> None:
    record = await world(spool, tmp_path, members=1)
    batch = WriteBatch()
    put_document(batch, DocumentRecord(TEAM, BROADCAST, empty_document(), 1, STAMP))
    await spool.commit(batch)
    checks = codes(await send_checklist(spool, record, BrandKit.default()))
    assert checks["unsubscribe_link"] is True
    assert checks["postal_address"] is False  # the default kit has none
    kit = BrandKit.from_json({**BrandKit.default().to_json(), "postal_address": "1 Main St"})
    assert codes(await send_checklist(spool, record, kit))["postal_address"] is True


async def test_drafts_schedule_cancel_and_delete_with_the_document(
    spool: Spool, tmp_path: Path
) -> None:
    record = await world(spool, tmp_path, members=1)
    drafts = BroadcastDrafts(spool, Acceptor(spool))
    assert not looks_like_id("../" + BROADCAST) and looks_like_id(BROADCAST.upper())
    with pytest.raises(ApiError) as missing:
        drafts.find(TEAM, "x" * 5000)
    assert missing.value.status == 404
    later = NOW + timedelta(days=1)
    # A check (the dashboard's checklist) that refuses leaves the draft as it was.
    seen = []

    async def refuse(checked: BroadcastRecord) -> None:
        seen.append(checked)
        raise ApiError(422, "validation_error", "Not sent: no.")

    async def admit(checked: BroadcastRecord) -> None:
        seen.append(checked)

    with pytest.raises(ApiError, match="Not sent"):
        await drafts.send(TEAM, record.id, NOW, schedule=lambda now: later, check=refuse)
    assert [checked.id for checked in seen] == [record.id]
    assert drafts.find(TEAM, record.id).status == "draft" and due_entries(spool, limit=10) == []
    scheduled = await drafts.send(TEAM, record.id, NOW, schedule=lambda now: later, check=admit)
    assert scheduled.status == "scheduled"
    assert [entry.broadcast_id for _, entry in due_entries(spool, limit=10)] == [record.id]
    canceled = await drafts.cancel(TEAM, record.id, NOW)
    assert (canceled.status, canceled.scheduled_at) == ("draft", None)
    assert due_entries(spool, limit=10) == []
    with pytest.raises(ApiError) as refused:
        await drafts.cancel(TEAM, record.id, NOW)
    assert refused.value.message == (
        "Only scheduled, queued or sending broadcasts can be canceled; this broadcast is `draft`."
    )

    batch = WriteBatch()
    put_document(batch, DocumentRecord(TEAM, BROADCAST, empty_document(), 1, STAMP))
    await spool.commit(batch)
    copy = await drafts.duplicate(TEAM, record.id, NOW)
    copied = get_document(spool, TEAM, copy.id)
    assert copied is not None and (copied.document, copied.revision) == (empty_document(), 1)
    assert (copy.status, copy.html, copy.segment_id) == ("draft", record.html, record.segment_id)
    await drafts.delete(TEAM, record.id)
    assert get_document(spool, TEAM, BROADCAST) is None
    assert get_document(spool, TEAM, copy.id) is not None
    with pytest.raises(ApiError):
        drafts.find(TEAM, record.id)


async def test_a_draft_may_wait_for_its_segment_but_is_not_sent_without_one(
    spool: Spool, tmp_path: Path
) -> None:
    """The dashboard's new broadcast offers "Choose later": a draft whose segment is ""."""
    await world(spool, tmp_path, members=1)
    drafts = BroadcastDrafts(spool, Acceptor(spool))
    fields = {"name": "Later", "segment_id": "", "sender": "", "subject": ""}
    record = await drafts.create(TEAM, fields, NOW)
    assert drafts.find(TEAM, record.id).segment_id == ""
    with pytest.raises(ApiError) as unknown:
        await drafts.create(TEAM, fields | {"segment_id": EMPTY_SEGMENT.replace("c2", "c9")}, NOW)
    assert unknown.value.status == 404
    ready = replace(record, html=HTML, sender="News <news@example.com>", subject="Hi")
    batch = WriteBatch()
    put_broadcast(batch, ready)
    await spool.commit(batch)
    with pytest.raises(ApiError) as refused:
        await drafts.send(TEAM, record.id, NOW)
    assert (refused.value.status, refused.value.message) == (
        422,
        "Missing `segment_id` field",
    )
