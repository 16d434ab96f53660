"""Insights of crafted emails, computed by the insights service's tail against a real spool and
a real authoritative DNS server (Knot): emails accepted through the one accept path (REST's
requests and an SMTP-submitted message), the sending domain's records published and withdrawn
in Knot, a scheduled recheck catching a DMARC record removed after the email was sent, the
recipient domain's rates from the metrics counters, a broadcast's emails, and a real rspamd
scoring a queued email."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dns.asyncbackend
import pytest
import trio

from postwire import _core
from postwire.accept import Acceptor, PreparedEmail, SubmittedMessage
from postwire.api.send_request import parse_send_request
from postwire.broadcasts.messages import compile_broadcast
from postwire.config import ApiConfig, Config, DeliveryConfig, DnsConfig, InsightsConfig
from postwire.delivery.engine import DeliveryEngine
from postwire.delivery.resolver import MxResolver
from postwire.domains import store as domain_store
from postwire.domains.verification import build_resolver
from postwire.insights.email_checks import EmailChecker
from postwire.insights.reading import read_email_insights
from postwire.insights.service import (
    BACKLOG_MS,
    BATCH,
    InsightsTail,
    drop_kept_bodies,
    recheck_due,
    serve_insights,
)
from postwire.services import ServiceDeps
from postwire.store.broadcasts import BroadcastRecord, put_broadcast
from postwire.store.deliveries import DELIVERIES, SUPPRESSIONS, new_suppression, suppression_key
from postwire.store.email_insights import keep_body, kept_body, kept_bytes, scan_kept_bodies
from postwire.store.email_search import id_floor
from postwire.store.metric_counters import count_event
from postwire.store.spool import TABLES, Spool
from postwire.unsubscribe.links import BroadcastLinks
from tests.dns_server import AuthoritativeDnsServer
from tests.peers import require_peer
from tests.rspamd_server import RspamdServer, rspamd_binary, running_rspamd

TEAM = "0190aaaa-0000-7000-8000-0000000000aa"
HELO = "mx.postwire.test"


@pytest.fixture(autouse=True)
def trio_dns_backend() -> None:
    dns.asyncbackend.set_default_backend("trio")  # as app.run does


class Clock:
    def __init__(self) -> None:
        self.ms = time.time_ns() // 1_000_000

    def __call__(self) -> int:
        return self.ms


@dataclass
class World:
    spool: Spool
    config: Config
    dns: AuthoritativeDnsServer
    clock: Clock
    acceptor: Acceptor
    tail: InsightsTail
    checker: EmailChecker

    async def domain(self, name: str, *, dmarc: str | None) -> domain_store.DomainRecord:
        """A verified domain whose required records are published, and `dmarc` at _dmarc."""
        domain = await domain_store.create_domain(self.spool, self.config, TEAM, name)
        domain = dataclasses.replace(domain, status="verified")
        batch = _core.WriteBatch()
        domain_store.DOMAINS.put(batch, f"domain/{TEAM}/{domain.id}", domain)
        await self.spool.commit(batch)
        for record in domain_store.domain_dns_records(domain, self.config):
            if record.required:
                value = (
                    f"{record.priority} {record.value}." if record.type == "MX" else record.value
                )
                self.dns.publish(record.fqdn, record.type, value)
        if dmarc is not None:
            self.dns.publish(f"_dmarc.{name}", "TXT", dmarc)
        return domain

    async def send(self, **body: Any) -> str:
        now = datetime.now(UTC)
        request = parse_send_request({"subject": "Autumn news", **body}, now=now)
        return await self.commit(await self.acceptor.prepare(TEAM, None, request, now), now)

    async def submit(self, recipients: list[str], message: bytes) -> str:
        now = datetime.now(UTC)
        parsed = SubmittedMessage.parse(message.replace(b"\n", b"\r\n"))
        prepared = await self.acceptor.prepare_submitted(TEAM, None, recipients, parsed, now)
        return await self.commit(prepared, now)

    async def commit(self, prepared: PreparedEmail, now: datetime) -> str:
        batch = _core.WriteBatch()
        self.acceptor.add_to_batch(batch, [prepared], now)
        await self.spool.commit(batch)
        return prepared.record.id

    async def insights(self, email_id: str) -> dict[str, Any]:
        """Follow the team once; the email's insights by code."""
        await self.tail.follow_team(TEAM)
        found = read_email_insights(self.spool, TEAM, email_id)
        assert found is not None, "no insights computed"
        return {insight.code: insight for insight in found.insights}


@pytest.fixture
async def world(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> AsyncIterator[World]:
    clock = Clock()
    config = Config(
        data_dir=tmp_path,
        api=ApiConfig(public_url="https://postwire.example.com"),
        dns=DnsConfig(nameservers=(dns_server.nameserver,)),
        delivery=DeliveryConfig(helo_name=HELO),
    )
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)), clock_ms=clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        checker = EmailChecker(config, spool, build_resolver(config), clock)
        tail = InsightsTail(config, spool, checker)
        yield World(spool, config, dns_server, clock, Acceptor(spool), tail, checker)
        nursery.cancel_scope.cancel()
    await spool.close()


CRAFTED_HTML = (
    "<h1>Autumn news</h1><p>New opening hours and a workshop about pruning fruit trees, every "
    "Saturday in November; bring your own gloves and we bring the coffee.</p>"
    '<p><a href="https://bit.ly/3autumn">See the hours</a> · '
    '<a href="http://www.shop.test/workshop">Book the workshop</a> · '
    '<a href="https://deals.elsewhere.test/">Partner deals</a></p>'
    '<img src="https://www.shop.test/hero.jpg">'
)


async def test_crafted_email_without_a_dmarc_record(world: World) -> None:
    await world.domain("shop.test", dmarc=None)
    email_id = await world.send(
        **{"from": "News <news@shop.test>", "to": ["postmaster@example.org"]},
        html=CRAFTED_HTML,
        text="",  # no text part
    )
    found = await world.insights(email_id)
    assert {
        "dkim_aligned",
        "spf_aligned",
        "dmarc_missing",
        "text_part_missing",
        "shortener_link",
        "http_link",
        "link_domain_unaligned",
        "image_missing_alt",
        "role_address",
    } <= set(found)
    assert found["dmarc_missing"].severity == "error"
    assert "_dmarc.shop.test" in found["dmarc_missing"].message
    assert "bit.ly" in found["shortener_link"].message
    assert "elsewhere.test" in found["link_domain_unaligned"].message
    assert "postmaster@example.org" in found["role_address"].message
    assert "dmarc_pass" not in found and "dmarc_fail" not in found  # no DMARC, no verdict


async def test_a_clean_email_passes_dmarc(world: World) -> None:
    await world.domain("clean.test", dmarc="v=DMARC1; p=quarantine; rua=mailto:d@clean.test")
    email_id = await world.send(
        **{"from": "hello@clean.test", "to": ["ada@example.org"]},
        html='<p>Your order shipped today. <a href="https://www.clean.test/o/1">Track it</a></p>',
    )
    found = await world.insights(email_id)
    assert set(found) == {
        "dkim_aligned",
        "spf_aligned",
        "dmarc_policy_enforced",
        "dmarc_pass",
        "text_part_matches",
    }
    assert all(insight.severity == "ok" for insight in found.values())


async def test_a_recheck_catches_a_dmarc_record_removed_later(world: World) -> None:
    await world.domain("later.test", dmarc="v=DMARC1; p=reject")
    email_id = await world.send(
        **{"from": "team@later.test", "to": ["ada@example.org"]}, text="Hello"
    )
    found = await world.insights(email_id)
    assert {"dmarc_policy_enforced", "dmarc_pass"} <= set(found)
    sent = read_email_insights(world.spool, TEAM, email_id)
    assert sent is not None and sent.auth_checked_at_ms == world.clock.ms

    world.dns.withdraw("_dmarc.later.test", "TXT")
    # Not due yet: the record's removal is not seen before the schedule says.
    world.clock.ms += 3_600_000
    assert await recheck_due(world.config, world.spool, world.checker) == 0
    world.clock.ms += world.config.insights.recheck_hours * 3_600_000
    assert await recheck_due(world.config, world.spool, world.checker) == 1

    rechecked = read_email_insights(world.spool, TEAM, email_id)
    assert rechecked is not None and rechecked.auth_checked_at_ms == world.clock.ms
    codes = {insight.code for insight in rechecked.insights}
    assert "dmarc_missing" in codes and "dmarc_pass" not in codes
    # The email's content insights were computed once, when it was sent.
    assert rechecked.computed_at_ms == sent.computed_at_ms


async def test_big_html_and_history_of_the_recipient(world: World) -> None:
    await world.domain("big.test", dmarc="v=DMARC1; p=none")
    batch = _core.WriteBatch()
    address = "gone@example.org"
    SUPPRESSIONS.put(batch, suppression_key(TEAM, address), new_suppression(address, "bounce", 1))
    await world.spool.commit(batch)
    paragraph = "<p>" + "Every plant in the catalogue, described at length. " * 40 + "</p>"
    email_id = await world.send(
        **{"from": "catalogue@big.test", "to": [address]}, html=paragraph * 60
    )
    found = await world.insights(email_id)
    assert {"html_clipped", "recipient_bounced_before", "dmarc_policy_none"} <= set(found)
    assert "Gmail clips" in found["html_clipped"].message


BULK_SUBMISSION = b"""From: Offers <offers@bulk.test>
To: ann@example.org
Subject: This week's offers
Precedence: bulk
MIME-Version: 1.0
Content-Type: text/html; charset=utf-8

<p>Our offers of the week, on every plant in the catalogue.</p>
"""


async def test_bulk_mail_submitted_over_smtp_without_list_unsubscribe(world: World) -> None:
    await world.domain("bulk.test", dmarc="v=DMARC1; p=reject")
    email_id = await world.submit(["ann@example.org"], BULK_SUBMISSION)
    found = await world.insights(email_id)
    # Read from the queued message itself: the record of an SMTP email keeps no body.
    assert {"list_unsubscribe_missing", "text_part_missing", "dmarc_pass"} <= set(found)
    assert "RFC 8058" in found["list_unsubscribe_missing"].message


async def test_a_delivered_smtp_email_is_judged_without_its_content(world: World) -> None:
    await world.domain("gone.test", dmarc="v=DMARC1; p=reject")
    email_id = await world.submit(
        ["ann@example.org"], BULK_SUBMISSION.replace(b"bulk.test", b"gone.test")
    )
    batch = _core.WriteBatch()
    # Gone from the queue with no copy kept (as when delivered while insights were off).
    batch.remove(email_id, world.clock.ms)
    await world.spool.commit(batch)
    found = await world.insights(email_id)
    assert {"content_not_checked", "dmarc_pass"} <= set(found)
    assert "list_unsubscribe_missing" not in found


async def deliver_through(
    world: World,
    sink: tuple[str, int],
    *,
    insights: bool,
    rspamd_url: str = "",
    broadcast_id: str | None = None,
) -> list[str]:
    """Submit BULK_SUBMISSION twice (as a broadcast's messages with `broadcast_id`) and let a
    real delivery engine deliver both to `sink` (which accepts at once) before any insights
    are computed; return the emails' ids."""
    host, port = sink
    delivery = dataclasses.replace(world.config.delivery, routes={"example.org": f"{host}:{port}"})
    insights_config = InsightsConfig(enabled=insights, rspamd_url=rspamd_url)
    config = dataclasses.replace(world.config, delivery=delivery, insights=insights_config)
    engine = DeliveryEngine(config, world.spool, MxResolver(config))
    ids = [
        await world.submit([to], BULK_SUBMISSION.replace(b"bulk.test", b"sunk.test"))
        for to in ("ann@example.org", "bo@example.org")
    ]
    if broadcast_id is not None:
        batch = _core.WriteBatch()
        for email_id in ids:
            record = DELIVERIES.get(world.spool, email_id)
            assert record is not None
            DELIVERIES.put(batch, email_id, dataclasses.replace(record, broadcast_id=broadcast_id))
        await world.spool.commit(batch)
    stopping = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(engine.run, stopping)
        with trio.fail_after(20):
            while any(world.spool.message_body(email_id) is not None for email_id in ids):
                await trio.sleep(0.02)
        stopping.set()
    return ids


async def test_an_smtp_email_delivered_at_once_still_gets_content_and_header_checks(
    world: World, smtp_sink: tuple[str, int]
) -> None:
    await world.domain("sunk.test", dmarc="v=DMARC1; p=reject")
    unscored = await deliver_through(world, smtp_sink, insights=True)
    # Without rspamd no copy is kept (its cost to the relay rate): judged without content.
    assert all(kept_body(world.spool, TEAM, email_id) is None for email_id in unscored)
    assert "content_not_checked" in await world.insights(unscored[0])
    first, second = await deliver_through(
        world, smtp_sink, insights=True, rspamd_url="http://127.0.0.1:9"
    )
    assert kept_body(world.spool, TEAM, first) is not None, "kept in the ack's commit"
    found = await world.insights(first)
    # Read from the copy delivery kept: the text part and the bulk headers were checked.
    assert {"list_unsubscribe_missing", "text_part_missing", "dmarc_pass"} <= set(found)
    assert "content_not_checked" not in found
    # Dropped in the commit that stored the insights.
    assert kept_body(world.spool, TEAM, first) is None
    assert kept_body(world.spool, TEAM, second) is None
    assert kept_bytes(world.spool) == 0


async def test_no_copy_is_kept_with_insights_off(world: World, smtp_sink: tuple[str, int]) -> None:
    await world.domain("sunk.test", dmarc="v=DMARC1; p=reject")
    ids = await deliver_through(world, smtp_sink, insights=False)
    assert all(kept_body(world.spool, TEAM, email_id) is None for email_id in ids)


async def test_a_broadcasts_messages_are_kept_only_for_rspamd(
    world: World, smtp_sink: tuple[str, int]
) -> None:
    # Without rspamd a broadcast's email is judged by the broadcast and the fields its engine
    # writes: its message is not needed, so not kept.
    await world.domain("sunk.test", dmarc="v=DMARC1; p=reject")
    plain = await deliver_through(world, smtp_sink, insights=True, broadcast_id="b-1")
    assert all(kept_body(world.spool, TEAM, email_id) is None for email_id in plain)
    scored = await deliver_through(
        world, smtp_sink, insights=True, broadcast_id="b-1", rspamd_url="http://127.0.0.1:9"
    )
    assert all(kept_body(world.spool, TEAM, email_id) is not None for email_id in scored)


async def test_no_copy_past_its_share_of_the_spool(
    world: World, smtp_sink: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Room for one message's copy only: the second is delivered without one, and judged
    # without its content rather than cost the spool's room.
    await world.domain("sunk.test", dmarc="v=DMARC1; p=reject")
    sample = await world.submit(["cy@example.org"], BULK_SUBMISSION.replace(b"bulk", b"sunk"))
    signed = world.spool.message_body(sample)
    assert signed is not None
    batch = _core.WriteBatch()
    batch.remove(sample, world.clock.ms)
    await world.spool.commit(batch)
    room = len(signed) * 3 // 2
    monkeypatch.setattr(
        "postwire.delivery.insights_copies.KEPT_BYTES_SHARE", room / world.config.spool.map_size
    )
    ids = await deliver_through(world, smtp_sink, insights=True, rspamd_url="http://127.0.0.1:9")
    kept = [email_id for email_id in ids if kept_body(world.spool, TEAM, email_id) is not None]
    assert len(kept) == 1
    (without,) = set(ids) - set(kept)
    assert "content_not_checked" in await world.insights(without)
    assert "list_unsubscribe_missing" in await world.insights(kept[0])
    assert kept_bytes(world.spool) == 0


async def test_insights_off_at_start_drops_every_copy(world: World) -> None:
    batch = _core.WriteBatch()
    for n in range(BATCH + 5):  # more than one scan's worth
        keep_body(batch, TEAM, id_floor(world.clock.ms) + f"-7000-8000-{n:012x}", b"M\r\n")
    await world.spool.commit(batch)
    config = dataclasses.replace(world.config, insights=InsightsConfig(enabled=False))
    deps = ServiceDeps(world.spool)
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_insights, config, deps)
        with trio.fail_after(10):
            while kept_bytes(world.spool):
                await trio.sleep(0.02)
        deps.stopping.set()
    assert scan_kept_bodies(world.spool, None, 10) == []


async def test_leftover_copies_are_dropped(world: World) -> None:
    await world.domain("left.test", dmarc="v=DMARC1; p=reject")
    done = await world.send(**{"from": "a@left.test", "to": ["b@example.org"]}, text="One")
    await world.insights(done)
    waiting = await world.send(**{"from": "a@left.test", "to": ["c@example.org"]}, text="Two")
    old = id_floor(world.clock.ms - BACKLOG_MS - 60_000) + "-7000-8000-000000000001"
    batch = _core.WriteBatch()
    for email_id in (done, waiting, old):  # a delivery that committed after the insights, ...
        keep_body(batch, TEAM, email_id, b"Subject: kept\r\n\r\nBody\r\n")
    await world.spool.commit(batch)
    assert await drop_kept_bodies(world.spool, world.clock.ms) == 2
    assert kept_body(world.spool, TEAM, waiting) is not None, "its insights will read it"
    assert kept_body(world.spool, TEAM, done) is None
    assert kept_body(world.spool, TEAM, old) is None
    # Insights turned off: every copy goes.
    assert await drop_kept_bodies(world.spool, world.clock.ms, every=True) == 1
    assert kept_body(world.spool, TEAM, waiting) is None
    assert kept_bytes(world.spool) == 0


async def test_each_email_is_computed_once_and_late_commits_are_swept(world: World) -> None:
    await world.domain("once.test", dmarc="v=DMARC1; p=reject")
    first = await world.send(**{"from": "a@once.test", "to": ["b@example.org"]}, text="One")
    await world.insights(first)
    computed = read_email_insights(world.spool, TEAM, first)
    # An email made before the tail's position but committed after it (a slow commit).
    now = datetime.now(UTC)
    request = parse_send_request(
        {"from": "a@once.test", "to": ["c@example.org"], "subject": "S", "text": "Two"}, now=now
    )
    late = await world.acceptor.prepare(TEAM, None, request, now)
    await world.send(**{"from": "a@once.test", "to": ["d@example.org"]}, text="Three")
    await world.tail.follow_team(TEAM)
    late_id = await world.commit(late, now)
    await world.tail.follow_team(TEAM)
    assert read_email_insights(world.spool, TEAM, late_id) is None
    world.tail.start_sweep()
    await world.tail.follow_team(TEAM)
    assert read_email_insights(world.spool, TEAM, late_id) is not None
    assert read_email_insights(world.spool, TEAM, first) == computed  # not computed again


async def test_the_recipient_domains_recent_bounces_from_the_metrics(world: World) -> None:
    await world.domain("rates.test", dmarc="v=DMARC1; p=reject")
    batch = _core.WriteBatch()
    for index in range(30):  # another team's deliveries count too: the rate is the domain's
        kind = "email.bounced" if index % 3 == 0 else "email.delivered"
        data = {"to": f"user{index}@flaky.test", "bounce": {"type": "Permanent"}}
        count_event(batch, "another-team", None, kind, world.clock.ms, data)
    await world.spool.commit(batch)
    email_id = await world.send(**{"from": "a@rates.test", "to": ["new@flaky.test"]}, text="Hi")
    found = await world.insights(email_id)
    assert found["recipient_domain_bounces"].message.startswith(
        "33.3% of Postwire's recent deliveries to flaky.test bounced (10 of 30"
    )


@pytest.fixture(scope="module")
def rspamd() -> Iterator[RspamdServer]:
    require_peer(rspamd_binary(), "rspamd", "rspamd")
    with running_rspamd() as server:
        yield server


async def test_rspamd_scores_a_queued_email_and_skips_a_delivered_one(
    world: World, rspamd: RspamdServer
) -> None:
    config = dataclasses.replace(world.config, insights=InsightsConfig(rspamd_url=rspamd.url))
    world.checker = EmailChecker(config, world.spool, build_resolver(config), world.clock)
    world.tail = InsightsTail(config, world.spool, world.checker)
    await world.domain("scored.test", dmarc="v=DMARC1; p=reject")
    queued = await world.send(
        **{"from": "shop@scored.test", "to": ["ann@example.org"]},
        html="<p>Your order shipped today; it arrives on Thursday.</p>",
    )
    found = await world.insights(queued)
    assert found["rspamd_score"].message.startswith("rspamd scored")
    assert "rspamd_skipped" not in found

    delivered = await world.send(**{"from": "shop@scored.test", "to": ["bo@example.org"]}, text="A")
    batch = _core.WriteBatch()
    batch.remove(delivered, world.clock.ms)
    await world.spool.commit(batch)
    found = await world.insights(delivered)
    assert "rspamd_skipped" in found and "rspamd_score" not in found


async def test_a_broadcasts_emails_are_judged_by_its_content_and_unsubscribe_links(
    world: World,
) -> None:
    config = dataclasses.replace(world.config, api=ApiConfig(public_url="http://127.0.0.1:3000"))
    world.checker = EmailChecker(config, world.spool, build_resolver(config), world.clock)
    world.tail = InsightsTail(config, world.spool, world.checker)
    domain = await world.domain("news.test", dmarc="v=DMARC1; p=reject")
    broadcast = BroadcastRecord(
        id=_core.new_id(),
        team_id=TEAM,
        segment_id=_core.new_id(),
        sender="News <news@news.test>",
        subject="The news",
        created_at="2026-11-25 08:00:00.000000+00",
        html='<p>Hi {{{FIRST_NAME|there}}}, the news.</p><img src="https://news.test/a.png">',
    )
    batch = _core.WriteBatch()
    put_broadcast(batch, broadcast)
    await world.spool.commit(batch)
    links = BroadcastLinks(
        b"k" * 32, config.api.public_url, TEAM, broadcast.id, domain.return_path_host
    )
    content = compile_broadcast(broadcast)
    now = datetime.now(UTC)
    ids = []
    for address in ("ann@example.org", "bob@example.org"):
        contact = links.for_contact(_core.new_id())
        request = content.request_for(address, {"FIRST_NAME": "Ann"}, contact.headers)
        ids.append(await world.commit(await world.acceptor.prepare(TEAM, None, request, now), now))
    batch = _core.WriteBatch()
    batch.remove(ids[1], world.clock.ms)  # delivered: the engine's fields are known anyway
    await world.spool.commit(batch)
    for email_id in ids:
        found = await world.insights(email_id)
        assert {"list_unsubscribe_broken", "tracking_unreachable", "image_missing_alt"} <= set(
            found
        )
        assert "http://" in found["list_unsubscribe_broken"].message
        assert "127.0.0.1" in found["tracking_unreachable"].message
