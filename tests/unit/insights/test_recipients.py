"""Recipient findings: the team's suppressions, role addresses, and the recipient domain's
recent bounce and deferral rates."""

from __future__ import annotations

from postwire._core import WriteBatch
from postwire.insights.recipients import recipient_findings, role_of
from postwire.store.deliveries import SUPPRESSIONS, new_suppression, suppression_key
from postwire.store.spool import Spool

TEAM = "0190aaaa-0000-7000-8000-000000000001"


def test_role_addresses() -> None:
    assert role_of("postmaster@example.com") == "postmaster"
    assert role_of("Abuse+x@example.com") == "abuse"
    assert role_of("ada@example.com") is None


async def test_earlier_bounces_and_complaints(spool: Spool) -> None:
    batch = WriteBatch()
    for address, origin in (("gone@example.com", "bounce"), ("angry@example.com", "complaint")):
        SUPPRESSIONS.put(batch, suppression_key(TEAM, address), new_suppression(address, origin, 1))
    await spool.commit(batch)
    found = recipient_findings(
        spool, TEAM, ["gone@example.com", "Angry@example.com", "info@example.com"], 0, None
    )
    assert [(f.code, f.values["address"]) for f in found] == [
        ("recipient_bounced_before", "gone@example.com"),
        ("recipient_complained_before", "angry@example.com"),
        ("role_address", "info@example.com"),
    ]
    # Another team's history is not this one's.
    assert recipient_findings(spool, "other", ["gone@example.com"], 0, None) == []


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
    found = recipient_findings(spool, TEAM, ["a@example.com", "b@quiet.test"], now_ms, reader)
    assert asked == [("example.com", 977, 1001), ("quiet.test", 977, 1001)]
    assert [f.code for f in found] == ["recipient_domain_bounces", "recipient_domain_deferrals"]
    assert found[0].values["percent"] == "20.0" and found[1].values["percent"] == "33.3"
