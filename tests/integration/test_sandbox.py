"""Sandbox mode in process: the delivery engine holds every message in the inbox and looks
nothing up, connects nowhere; the sandbox service keeps its domain verified for every team,
and takes it back when a later start runs without the sandbox."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import dkim
import pytest
import trio

from postwire.accept import Acceptor
from postwire.config import Config, load_config
from postwire.domains.store import domain_dns_records, find_domain_by_name
from postwire.errors import ApiError
from postwire.sandbox import SANDBOX_DOMAIN, serve_sandbox
from postwire.services import ServiceDeps
from postwire.store import accounts
from postwire.store.sandbox_inbox import get_held, held_source, list_held
from postwire.store.spool import Spool, serve_spool
from tests.integration.delivery_harness import TEAM, engine_for
from tests.network_traps import outbound_traps


async def test_the_engine_holds_every_message_and_connects_nowhere(tmp_path: Path) -> None:
    with outbound_traps() as traps:
        environ = {"POSTWIRE_SANDBOX": "true", "POSTWIRE_DNS_NAMESERVERS": traps.nameserver}
        routes = {"routed.test": traps.smtp_address}
        async with engine_for(tmp_path, routes, environ=environ) as harness:
            email_id = await harness.send(["ann@routed.test", "bob@example.org"])
            signed = harness.spool.message_body(email_id)
            envelope_from = harness.record(email_id).envelope_from
            await harness.until(lambda: harness.spool.message_body(email_id) is None)
            assert harness.events(email_id) == ["email.sent", "email.delivered", "email.delivered"]
            assert harness.last_event(email_id) == "delivered"
            held = get_held(harness.spool, TEAM, email_id)
            source = held_source(harness.spool, TEAM, email_id)
            assert list_held(harness.spool, TEAM, limit=10) == ([held], False)
        assert traps.dns_queries() == 0
        assert traps.smtp_connections() == 0
    assert harness.connections == []
    assert held is not None
    assert held.recipients == ["ann@routed.test", "bob@example.org"]
    assert held.envelope_from == envelope_from
    assert (held.sender, held.subject, held.size) == (
        "Shop <shop@sender.test>",
        "Hello",
        len(signed),
    )
    assert source == signed, "the inbox keeps the bytes that would have been sent"
    txt = harness.domain.dkim_dns_txt.encode()
    assert dkim.verify(source, dnsfunc=lambda name, timeout=5: txt)


@asynccontextmanager
async def open_spool(config: Config) -> AsyncIterator[Spool]:
    async with trio.open_nursery() as nursery:
        spool: Spool = await nursery.start(serve_spool, config)
        yield spool
        nursery.cancel_scope.cancel()


async def start_sandbox(nursery: trio.Nursery, config: Config, spool: Spool) -> trio.Event:
    stopping = trio.Event()
    await nursery.start(serve_sandbox, config, ServiceDeps(spool=spool, stopping=stopping))
    return stopping


async def test_every_team_gets_the_verified_domain_until_the_sandbox_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("postwire.sandbox.TEAM_POLL_SECONDS", 0.01)
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path), "POSTWIRE_SANDBOX": "true"})
    async with open_spool(config) as spool, trio.open_nursery() as nursery:
        stopping = await start_sandbox(nursery, config, spool)
        (first,) = accounts.list_teams(spool)  # made by the sandbox, for `keys create` to join
        domain = find_domain_by_name(spool, first.id, SANDBOX_DOMAIN)
        assert domain is not None and domain.status == "verified"
        assert domain.verification_started_at_ms is None, "the verifier never looks it up"
        records = domain_dns_records(domain, config)
        assert domain.record_statuses == {record.key: "verified" for record in records}
        assert Acceptor(spool).sending_domain(first.id, None, SANDBOX_DOMAIN).id == domain.id

        later = await accounts.create_team(spool, "later", datetime.now(UTC))
        with trio.fail_after(10):
            while find_domain_by_name(spool, later.id, SANDBOX_DOMAIN) is None:
                await trio.sleep(0.01)
        other = find_domain_by_name(spool, later.id, SANDBOX_DOMAIN)
        assert other is not None and other.status == "verified"
        assert other.dkim_dns_txt != domain.dkim_dns_txt, "each team signs with its own key"
        stopping.set()

    off = dataclasses.replace(config, sandbox=False)
    async with open_spool(off) as spool, trio.open_nursery() as nursery:
        await start_sandbox(nursery, off, spool)
        for team in accounts.list_teams(spool):
            retired = find_domain_by_name(spool, team.id, SANDBOX_DOMAIN)
            assert retired is not None and retired.status == "not_started"
            with pytest.raises(ApiError) as refusal:
                Acceptor(spool).sending_domain(team.id, None, SANDBOX_DOMAIN)
            assert refusal.value.status == 403

    async with open_spool(config) as spool, trio.open_nursery() as nursery:
        stopping = await start_sandbox(nursery, config, spool)
        again = find_domain_by_name(spool, first.id, SANDBOX_DOMAIN)
        assert again is not None and again.status == "verified"
        assert again.id == domain.id, "the same domain and key, verified again"
        stopping.set()
