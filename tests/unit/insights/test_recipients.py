"""Recipient findings: the team's suppressions, role addresses, and the recipient domain's
recent bounce and deferral rates."""

from __future__ import annotations

from postwire._core import WriteBatch
from postwire.insights.recipients import recipient_findings, role_of
from postwire.store.deliveries import SUPPRESSIONS, new_suppression, suppression_key
from postwire.store.emails import EmailRecord, put_new_email, record_last_event
from postwire.store.spool import Spool

TEAM = "0190aaaa-0000-7000-8000-000000000001"
EMAIL = "0190bbbb-0000-7000-8000-000000000009"


def email_to(address: str, email_id: str) -> EmailRecord:
    return EmailRecord(
        id=email_id,
        team_id=TEAM,
        domain_id="d",
        sender="shop@example.net",
        to=[address],
        subject="S",
        message_id=f"<{email_id}@example.net>",
        created_at="2026-11-25 08:00:00.000000+00",
        last_event="queued",
        envelope_from="bounce@send.example.net",
        recipients=[address],
    )


def test_role_addresses() -> None:
    assert role_of("postmaster@example.com") == "postmaster"
    assert role_of("Abuse+x@example.com") == "abuse"
    assert role_of("ada@example.com") is None


async def test_earlier_bounces_and_complaints(spool: Spool) -> None:
    batch = WriteBatch()
    for address, origin in (("gone@example.com", "bounce"), ("angry@example.com", "complaint")):
        SUPPRESSIONS.put(batch, suppression_key(TEAM, address), new_suppression(address, origin, 1))
    await spool.commit(batch)
    found = await recipient_findings(
        spool, TEAM, EMAIL, ["gone@example.com", "Angry@example.com", "info@example.com"], 0, None
    )
    assert [(f.code, f.values["address"]) for f in found] == [
        ("recipient_bounced_before", "gone@example.com"),
        ("recipient_complained_before", "angry@example.com"),
        ("role_address", "info@example.com"),
    ]
    # Another team's history is not this one's.
    assert await recipient_findings(spool, "other", EMAIL, ["gone@example.com"], 0, None) == []


async def test_recipient_domain_rates(spool: Spool) -> None:
    counts = {
        "example.com": {"delivered": 80, "bounced": 20, "delivery_delayed": 50},
        "quiet.test": {"delivered": 5, "bounced": 5},
    }
    asked: list[tuple[str, int, int]] = []

    def reader(_: Spool, domain: str, first: int, end: int) -> dict[str, int]:
        asked.append((domain, first, end))
        return counts.get(domain, {})

    now_ms = 1_000 * 3_600_000 + 5
    found = await recipient_findings(
        spool, TEAM, EMAIL, ["a@example.com", "b@quiet.test"], now_ms, reader
    )
    assert asked == [("example.com", 977, 1001), ("quiet.test", 977, 1001)]
    assert [f.code for f in found] == ["recipient_domain_bounces", "recipient_domain_deferrals"]
    assert found[0].values["percent"] == "20.0" and found[1].values["percent"] == "33.3"


async def test_earlier_bounces_that_did_not_suppress(spool: Spool) -> None:
    records = [
        email_to("ann@example.com", f"0190aaaa-0000-7000-8000-00000000000{n}") for n in range(4)
    ]
    batch = WriteBatch()
    for record in records:
        put_new_email(batch, record)
    record_last_event(batch, records[0], "bounced")  # a mailbox full, say: not suppressed
    record_last_event(batch, records[3], "bounced")  # the email itself, later: not "before"
    await spool.commit(batch)
    found = await recipient_findings(spool, TEAM, records[3].id, ["Ann@example.com"], 0, None)
    assert [(f.code, f.values["count"], f.values["total"]) for f in found] == [
        ("recipient_bounced_recently", "1", "3")
    ]
    assert await recipient_findings(spool, TEAM, records[0].id, ["ann@example.com"], 0, None) == []


async def test_a_suppression_made_after_the_email_is_not_its_history(spool: Spool) -> None:
    # The email's own bounce suppressed the address before its insights were computed: it
    # was sent to, so it is not "suppressed before"; its bounce shows on its own page.
    accepted_ms = int(EMAIL[:8] + EMAIL[9:13], 16)
    batch = WriteBatch()
    later = new_suppression("gone@example.com", "bounce", accepted_ms + 900, source_id=EMAIL)
    SUPPRESSIONS.put(batch, suppression_key(TEAM, "gone@example.com"), later)
    await spool.commit(batch)
    assert await recipient_findings(spool, TEAM, EMAIL, ["gone@example.com"], 0, None) == []
