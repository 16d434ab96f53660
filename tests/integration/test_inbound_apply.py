"""Applying DSNs and ARF reports to a real spool, about an email accepted through `Acceptor`:
only to the email a genuine return path names, once per email, recipient and status."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import trio

from postwire import _core
from postwire.accept import Acceptor
from postwire.api.send_request import parse_send_request
from postwire.config import load_config
from postwire.domains import store as domain_store
from postwire.inbound.apply import (
    InboundAddress,
    apply_report,
    load_return_path_key,
    recognise_address,
)
from postwire.inbound.reports import parse_report
from postwire.inbound.verp import LEGACY_MARGIN, ReturnPathKey, verp_address
from postwire.store.accounts import contract_timestamp
from postwire.store.deliveries import email_events, list_suppressions
from postwire.store.emails import EMAILS, email_key
from postwire.store.spool import TABLES, Spool

TEAM = "team-1"
OTHER_TEAM = "team-2"
THIRD_TEAM = "team-3"  # its own domain, other.test
SAMPLES = Path(__file__).parent.parent / "data" / "inbound"
SAMPLE_VERP = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test"
NOW_MS = 1_800_000_000_000


@asynccontextmanager
async def open_spool(tmp_path: Path) -> AsyncIterator[Spool]:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
        first = await domain_store.create_domain(spool, config, TEAM, "sender.test")
        batch = _core.WriteBatch()
        # Two teams own the same domain name (as before names were one team's); a third has its
        # own. One DKIM key serves all three: keys cost a second each, and are not read here.
        for team, name in (
            (TEAM, "sender.test"),
            (OTHER_TEAM, "sender.test"),
            (THIRD_TEAM, "other.test"),
        ):
            domain_id = first.id if team == TEAM else _core.new_id()
            domain = dataclasses.replace(
                first, id=domain_id, team_id=team, name=name, status="verified"
            )
            domain_store.DOMAINS.put(batch, f"domain/{team}/{domain_id}", domain)
            entry = domain_store.DomainNameEntry(domain_id)
            domain_store.DOMAIN_NAMES.put(batch, f"name/{team}/{name}", entry)
        await spool.commit(batch)
        yield spool
        nursery.cancel_scope.cancel()
    await spool.close()


async def key_of(spool: Spool) -> ReturnPathKey:
    return await load_return_path_key(spool, load_config(None, {}))


async def send(
    spool: Spool, to: list[str], team: str = TEAM, domain: str = "sender.test"
) -> tuple[str, str]:
    """Accept an email; return its id and its VERP envelope sender."""
    now = datetime.now(UTC)
    body = {"from": f"Shop <shop@{domain}>", "to": to, "subject": "Hello", "text": "Hi!"}
    prepared = await Acceptor(spool).prepare(team, None, parse_send_request(body, now=now), now)
    batch = _core.WriteBatch()
    Acceptor(spool).add_to_batch(batch, [prepared], now)
    await spool.commit(batch)
    return prepared.record.id, prepared.record.envelope_from


def sample_for(name: str, verp: str) -> bytes:
    return (SAMPLES / name).read_bytes().replace(SAMPLE_VERP.encode(), verp.encode())


def last_event(spool: Spool, email_id: str, team: str = TEAM) -> str:
    record = EMAILS.get(spool, email_key(team, email_id))
    assert record is not None
    return record.last_event


async def test_failed_dsn_bounces_and_suppresses_once(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        email_id, verp = await send(spool, ["nobody@example.org", "ann@example.org"])
        report = parse_report(sample_for("postfix-failed.eml", verp))
        assert report is not None

        key = await key_of(spool)
        applied = await apply_report(spool, key, report, verp, NOW_MS)
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

        # The same DSN again changes nothing.
        assert await apply_report(spool, key, report, verp, NOW_MS + 1) is None
        assert list_suppressions(spool, TEAM) == [suppression]
        assert len(email_events(spool, TEAM, email_id)) == 1
        assert list_suppressions(spool, OTHER_TEAM) == []


async def test_delayed_dsn_records_a_delay_without_suppressing(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        email_id, verp = await send(spool, ["slow@example.net"])
        report = parse_report(sample_for("postfix-delayed.eml", verp))
        assert report is not None
        applied = await apply_report(spool, await key_of(spool), report, verp, NOW_MS)
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
        # Feedback loops send to the complaint address: the reported message's envelope sender
        # names the email.
        complaints = "complaints@send.sender.test"
        applied = await apply_report(spool, await key_of(spool), report, complaints, NOW_MS)
        assert applied is not None
        assert applied.events == ("email.complained",)
        (event,) = email_events(spool, TEAM, email_id)
        assert event.data == {"to": "angry@mailbox.example", "feedback_type": "abuse"}
        assert last_event(spool, email_id) == "complained"
        (suppression,) = list_suppressions(spool, TEAM)
        assert (suppression.email, suppression.origin) == ("angry@mailbox.example", "complaint")


async def test_reports_about_unknown_or_foreign_emails_change_nothing(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        key = await key_of(spool)
        email_id, verp = await send(spool, ["nobody@example.org"])
        # A VERP address with a real id but another host names no email.
        wrong_host = verp.replace("@", "@x")
        report = parse_report(sample_for("postfix-failed.eml", wrong_host))
        assert report is not None
        assert await apply_report(spool, key, report, wrong_host, NOW_MS) is None
        unknown = parse_report((SAMPLES / "postfix-failed.eml").read_bytes())
        assert unknown is not None
        assert await apply_report(spool, key, unknown, SAMPLE_VERP, NOW_MS) is None
        # A DSN about a recipient the email never had (it had two) changes nothing.
        two_id, two_verp = await send(spool, ["a@example.org", "b@example.org"])
        stranger = parse_report(sample_for("postfix-failed.eml", two_verp))
        assert stranger is not None
        assert await apply_report(spool, key, stranger, two_verp, NOW_MS) is None
        assert email_events(spool, TEAM, email_id) == []
        assert email_events(spool, TEAM, two_id) == []
        assert list_suppressions(spool, TEAM) == []


async def test_twenty_copies_of_a_report_are_applied_once(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        key = await key_of(spool)
        email_id, verp = await send(spool, ["slow@example.net"])
        delayed = parse_report(sample_for("postfix-delayed.eml", verp))
        assert delayed is not None
        applied: list[object] = []

        async def apply_delay(now_ms: int) -> None:
            applied.append(await apply_report(spool, key, delayed, verp, now_ms))

        async with trio.open_nursery() as nursery:  # at once, as a flood arrives
            for copy in range(20):
                nursery.start_soon(apply_delay, NOW_MS + copy)
        assert len([result for result in applied if result is not None]) == 1
        events = email_events(spool, TEAM, email_id)
        assert [event.type for event in events] == ["email.delivery_delayed"]
        # Another status of the same recipient is another report: the final failure counts.
        failed = parse_report(sample_for("postfix-failed.eml", verp))
        assert failed is not None
        result = await apply_report(spool, key, failed, verp, NOW_MS + 100)
        assert result is not None and result.events == ("email.bounced",)
        assert await apply_report(spool, key, failed, verp, NOW_MS + 101) is None
        assert len(email_events(spool, TEAM, email_id)) == 2
        complaint = parse_report(sample_for("arf-abuse.eml", verp))
        assert complaint is not None
        for _ in range(3):
            await apply_report(spool, key, complaint, verp, NOW_MS + 200)
        assert [event.type for event in email_events(spool, TEAM, email_id)] == [
            "email.delivery_delayed", "email.bounced", "email.complained",
        ]  # fmt: skip


async def test_forged_return_paths_are_refused_and_change_nothing(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        key = await key_of(spool)
        email_id, verp = await send(spool, ["nobody@example.org"])
        host = "send.sender.test"
        untagged = f"bounces+{email_id}@{host}"  # what it was before tags: anyone could write it
        forgeries = [
            untagged,
            verp_address(b"guessed secret, not the spool's", email_id, host),
            f"{verp[: -len(host) - 2]}{'b' if verp[-len(host) - 2] == 'a' else 'a'}@{host}",
        ]
        for forged in forgeries:
            assert recognise_address(spool, key, forged, NOW_MS) is InboundAddress.UNKNOWN
            report = parse_report(sample_for("postfix-failed.eml", forged))
            assert report is not None
            assert await apply_report(spool, key, report, forged, NOW_MS) is None
            # Nor does quoting one at the complaint address help.
            complaints = f"complaints@{host}"
            assert await apply_report(spool, key, report, complaints, NOW_MS) is None
        assert email_events(spool, TEAM, email_id) == []
        assert list_suppressions(spool, TEAM) == []
        assert last_event(spool, email_id) == "queued"
        # The genuine ones are recognised; other addresses are not Postwire's.
        assert recognise_address(spool, key, verp, NOW_MS) is InboundAddress.REPORTS
        assert recognise_address(spool, key, verp.upper(), NOW_MS) is InboundAddress.REPORTS
        complaints = f"complaints@{host}"
        assert recognise_address(spool, key, complaints, NOW_MS) is InboundAddress.REPORTS
        for other in ("ann@example.org", verp.replace(host, "send.unknown.test")):
            assert recognise_address(spool, key, other, NOW_MS) is InboundAddress.OTHER


async def test_a_report_about_another_teams_email_applies_to_nobody(tmp_path: Path) -> None:
    async with open_spool(tmp_path) as spool:
        key = await key_of(spool)
        email_id, verp = await send(spool, ["nobody@example.org"])
        theirs_id, their_verp = await send(
            spool, ["nobody@example.org"], team=THIRD_TEAM, domain="other.test"
        )
        # Team A's DSN sent to team B's return path, and to team B's complaint address.
        dsn = parse_report(sample_for("postfix-failed.eml", verp))
        arf = parse_report(sample_for("arf-abuse.eml", verp))
        assert dsn is not None and arf is not None
        assert await apply_report(spool, key, dsn, their_verp, NOW_MS) is None
        assert await apply_report(spool, key, arf, "complaints@send.other.test", NOW_MS) is None
        # Nor to another email of the same team: a report is about the email it quotes.
        second_id, second_verp = await send(spool, ["nobody@example.org"])
        assert await apply_report(spool, key, dsn, second_verp, NOW_MS) is None
        for team, sent in ((TEAM, email_id), (THIRD_TEAM, theirs_id), (TEAM, second_id)):
            assert email_events(spool, team, sent) == []
            assert last_event(spool, sent, team) == "queued"
        assert list_suppressions(spool, TEAM) == list_suppressions(spool, THIRD_TEAM) == []
        # At its own team's complaint address the same report applies.
        applied = await apply_report(spool, key, arf, "complaints@send.sender.test", NOW_MS)
        assert applied is not None and (applied.team_id, applied.email_id) == (TEAM, email_id)


async def test_untagged_return_paths_of_older_emails_work_until_they_expire(
    tmp_path: Path,
) -> None:
    async with open_spool(tmp_path) as spool:
        key = await key_of(spool)
        email_id, _ = await send(spool, ["nobody@example.org"])
        # An email accepted before return paths were tagged, three days ago.
        untagged = f"bounces+{email_id}@send.sender.test"
        sent = datetime.now(UTC) - timedelta(days=3)
        record = EMAILS.get(spool, email_key(TEAM, email_id))
        assert record is not None
        batch = _core.WriteBatch()
        older = dataclasses.replace(
            record, envelope_from=untagged, created_at=contract_timestamp(sent)
        )
        EMAILS.put(batch, email_key(TEAM, email_id), older)
        await spool.commit(batch)
        expiry_ms = int((sent + timedelta(hours=72) + LEGACY_MARGIN).timestamp() * 1000)
        report = parse_report(sample_for("postfix-failed.eml", untagged))
        assert report is not None

        late = expiry_ms + 1
        assert recognise_address(spool, key, untagged, late) is InboundAddress.UNKNOWN
        assert await apply_report(spool, key, report, untagged, late) is None
        assert email_events(spool, TEAM, email_id) == []

        in_time = expiry_ms - 1
        assert recognise_address(spool, key, untagged, in_time) is InboundAddress.REPORTS
        applied = await apply_report(spool, key, report, untagged, in_time)
        assert applied is not None and applied.events == ("email.bounced",)
        assert last_event(spool, email_id) == "bounced"
