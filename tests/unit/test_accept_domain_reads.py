"""The sending domain of every accepted message is read parked, never blocking (on a table
store on the network a blocking read stalls every task of the process for a round trip), and
read again for every message, never kept in memory: a domain no longer verified stops
sending at once. A real spool; `record_reads` wraps its facade."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from postwire.accept import Acceptor, SubmittedMessage
from postwire.api.send_request import parse_send_request
from postwire.config import Config, DomainsConfig
from postwire.domains import store as domain_store
from postwire.errors import ApiError
from postwire.store.spool import Spool
from tests.table_reads import record_reads

TEAM = "0190aaaa-0000-7000-8000-0000000000dd"
# From a subdomain of the verified domain, on behalf of an address at the domain itself.
SUBMITTED = (
    b"From: News <news@mail.shop.test>\r\nSender: desk@shop.test\r\nTo: ann@example.org\r\n"
    b"Subject: Autumn news\r\n\r\nNew opening hours.\r\n"
)


@pytest.fixture
async def acceptor(spool: Spool, tmp_path: Path) -> Acceptor:
    config = Config(data_dir=tmp_path, domains=DomainsConfig(dkim_key_bits=1024))
    domain = await domain_store.create_domain(spool, config, TEAM, "shop.test")
    await domain_store.save_domain(spool, dataclasses.replace(domain, status="verified"))
    return Acceptor(spool)


async def test_smtp_and_rest_intake_read_the_domain_parked(
    spool: Spool, acceptor: Acceptor
) -> None:
    reads = record_reads(spool, ["domains"])
    now = datetime.now(UTC)
    submitted = SubmittedMessage.parse(SUBMITTED)
    prepared = await acceptor.prepare_submitted(TEAM, None, ["ann@example.org"], submitted, now)
    assert prepared.record.sender == "News <news@mail.shop.test>"
    request = parse_send_request(
        {"from": "news@shop.test", "to": ["ann@example.org"], "subject": "S", "text": "T"},
        now=now,
    )
    await acceptor.prepare(TEAM, None, request, now)

    assert reads, "the domain was not read from the store"
    assert {read.how for read in reads} == {"aget"}


async def test_a_domain_no_longer_verified_stops_sending_at_once(
    spool: Spool, acceptor: Acceptor
) -> None:
    now = datetime.now(UTC)
    submitted = SubmittedMessage.parse(SUBMITTED)
    await acceptor.prepare_submitted(TEAM, None, ["ann@example.org"], submitted, now)
    domain = domain_store.find_domain_by_name(spool, TEAM, "shop.test")
    assert domain is not None
    await domain_store.save_domain(spool, dataclasses.replace(domain, status="not_started"))

    with pytest.raises(ApiError) as refused:
        await acceptor.prepare_submitted(TEAM, None, ["ann@example.org"], submitted, now)
    assert refused.value.status == 403
    assert "`mail.shop.test` domain is not verified" in refused.value.message
