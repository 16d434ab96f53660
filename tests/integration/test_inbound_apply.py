"""Applying DSNs and ARF reports to a real spool, about an email accepted through `Acceptor`."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import trio

from postwire import _core
from postwire.accept import Acceptor
from postwire.api.send_request import parse_send_request
from postwire.config import load_config
from postwire.domains import store as domain_store
from postwire.inbound.apply import apply_report
from postwire.inbound.reports import parse_report
from postwire.store.deliveries import email_events, list_suppressions
from postwire.store.emails import EMAILS, email_key
from postwire.store.spool import TABLES, Spool

TEAM = "team-1"
OTHER_TEAM = "team-2"
SAMPLES = Path(__file__).parent.parent / "data" / "inbound"
SAMPLE_VERP = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test"
NOW_MS = 1_800_000_000_000


@asynccontextmanager
async def open_spool(tmp_path: Path) -> AsyncIterator[Spool]:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
        for team in (TEAM, OTHER_TEAM):  # two teams own the same domain name
            domain = await domain_store.create_domain(spool, config, team, "sender.test")
            batch = _core.WriteBatch()
            domain = dataclasses.replace(domain, status="verified")
            domain_store.DOMAINS.put(batch, f"domain/{team}/{domain.id}", domain)
            await spool.commit(batch)
        yield spool
        nursery.cancel_scope.cancel()
    await spool.close()


async def send(spool: Spool, to: list[str], team: str = TEAM) -> tuple[str, str]:
    """Accept an email; return its id and its VERP envelope sender."""
    now = datetime.now(UTC)
    body = {"from": "Shop <shop@sender.test>", "to": to, "subject": "Hello", "text": "Hi!"}
    prepared = await Acceptor(spool).prepare(team, None, parse_send_request(body, now=now), now)
    batch = _core.WriteBatch()
    Acceptor(spool).add_to_batch(batch, [prepared], now)
    await spool.commit(batch)
    return prepared.record.id, prepared.record.envelope_from


def sample_for(name: str, verp: str) -> bytes:
    return (SAMPLES / name).read_bytes().replace(SAMPLE_VERP.encode(), verp.encode())


def last_event(spool: Spool, email_id: str) -> str:
    record = EMAILS.get(spool, email_key(TEAM, email_id))
    assert record is not None
    return record.last_event


async def test_failed_dsn_bounces_and_suppresses_once(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        email_id, verp = await send(spool, ["nobody@example.org", "ann@example.org"])
        report = parse_report(sample_for("postfix-failed.eml", verp))
        assert report is not None

        applied = await apply_report(spool, report, verp, NOW_MS)
        assert applied is not None
        assert (applied.team_id, applied.email_id) == (TEAM, email_id)
        assert applied.suppressed == ("nobody@example.org",)
        (event,) = email_events(spool, TEAM, email_id)
        assert event.type == "email.bounced"
        assert event.data["to"] == "nobody@example.org"
        assert event.data["bounce"]["type"] == "Permanent"
        assert event.data["bounce"]["subType"] == "NoEmail"
        assert event.data["bounce"]["diagnosticCode"] == [
            "smtp; 550 5.1.1 <nobody@example.org>: Recipient address rejected: "
            "User unknown in virtual mailbox table"
        ]
        assert last_event(spool, email_id) == "bounced"
        (suppression,) = list_suppressions(spool, TEAM)
        assert (suppression.email, suppression.origin, suppression.source_id) == (
            "nobody@example.org", "bounce", email_id,
        )  # fmt: skip

        again = await apply_report(spool, report, verp, NOW_MS + 1)
        assert again is not None and again.suppressed == ()
        assert list_suppressions(spool, TEAM) == [suppression]
        # Events are not deduplicated: the same DSN twice reports the bounce twice.
        assert len(email_events(spool, TEAM, email_id)) == 2
        assert list_suppressions(spool, OTHER_TEAM) == []


async def test_delayed_dsn_records_a_delay_without_suppressing(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        email_id, verp = await send(spool, ["slow@example.net"])
        report = parse_report(sample_for("postfix-delayed.eml", verp))
        assert report is not None
        applied = await apply_report(spool, report, verp, NOW_MS)
        assert applied is not None and applied.events == ("email.delivery_delayed",)
        (event,) = email_events(spool, TEAM, email_id)
        assert event.data["to"] == "slow@example.net"
        assert event.data["diagnostic"].startswith("X-Postfix; connect to mx.example.net")
        assert last_event(spool, email_id) == "delivery_delayed"
        assert list_suppressions(spool, TEAM) == []


async def test_arf_complaint_suppresses_the_complainant(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        email_id, verp = await send(spool, ["angry@mailbox.example", "happy@mailbox.example"])
        report = parse_report(sample_for("arf-abuse.eml", verp))
        assert report is not None
        # FBL reports often go to an address of the provider's choosing: the reported
        # message's envelope sender still names the email.
        applied = await apply_report(spool, report, "fbl@sender.test", NOW_MS)
        assert applied is not None
        assert applied.events == ("email.complained",)
        (event,) = email_events(spool, TEAM, email_id)
        assert event.data == {"to": "angry@mailbox.example", "feedback_type": "abuse"}
        assert last_event(spool, email_id) == "complained"
        (suppression,) = list_suppressions(spool, TEAM)
        assert (suppression.email, suppression.origin) == ("angry@mailbox.example", "complaint")


async def test_reports_about_unknown_or_foreign_emails_change_nothing(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        email_id, verp = await send(spool, ["nobody@example.org"])
        # A VERP address with a real id but another host names no email.
        wrong_host = verp.replace("@", "@x")
        report = parse_report(sample_for("postfix-failed.eml", wrong_host))
        assert report is not None
        assert await apply_report(spool, report, wrong_host, NOW_MS) is None
        unknown = parse_report((SAMPLES / "postfix-failed.eml").read_bytes())
        assert unknown is not None
        assert await apply_report(spool, unknown, SAMPLE_VERP, NOW_MS) is None
        # A DSN about a recipient the email never had (it had two) changes nothing.
        two_id, two_verp = await send(spool, ["a@example.org", "b@example.org"])
        stranger = parse_report(sample_for("postfix-failed.eml", two_verp))
        assert stranger is not None
        assert await apply_report(spool, stranger, two_verp, NOW_MS) is None
        assert email_events(spool, TEAM, email_id) == []
        assert email_events(spool, TEAM, two_id) == []
        assert list_suppressions(spool, TEAM) == []
