"""Delivery scenarios end to end inside one process: scheduled mail, a tarpitting site beside a
fast one, TLS policies, and MX records from a real DNS server. Every peer is real (the scripted
aiosmtpd receiver, Knot DNS) on loopback; mail is accepted through the API's path; the engine's
clock is a list the test moves. Nothing here measures time: tests count messages."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio

from postwire import _core
from postwire.accept import Acceptor
from postwire.api.send_request import parse_send_request
from postwire.config import Config, load_config
from postwire.delivery.engine import DeliveryEngine
from postwire.delivery.resolver import MxResolver
from postwire.domains import store as domain_store
from postwire.smtp.client_connection import SmtpConnection, open_smtp_connection
from postwire.store.accounts import contract_timestamp
from postwire.store.deliveries import email_events
from postwire.store.emails import EMAILS, EmailRecord, cancel_email, email_key, reschedule_email
from postwire.store.spool import TABLES, Spool
from tests.dns_server import AuthoritativeDnsServer
from tests.smtp_receiver import ReceivedMessage, ScriptedSmtpReceiver

TEAM = "team-1"


@dataclass
class Harness:
    spool: Spool
    engine: DeliveryEngine
    acceptor: Acceptor
    clock: list[datetime]
    # Every SMTP connection the engine opened, as (host, port, connection).
    connections: list[tuple[str, int, SmtpConnection]] = field(default_factory=list)

    async def send(self, to: list[str], *, scheduled_at: datetime | None = None) -> str:
        body: dict[str, Any] = {
            "from": "Shop <shop@sender.test>", "to": to, "subject": "Hello", "text": "Hi!",
        }  # fmt: skip
        if scheduled_at is not None:
            body["scheduled_at"] = scheduled_at.isoformat()
        request = parse_send_request(body, now=self.clock[0])
        prepared = await self.acceptor.prepare(TEAM, None, request, self.clock[0])
        batch = _core.WriteBatch()
        self.acceptor.add_to_batch(batch, [prepared], self.clock[0])
        await self.spool.commit(batch)
        self.engine.wake()
        return prepared.record.id

    def record(self, email_id: str) -> EmailRecord:
        record = EMAILS.get(self.spool, email_key(TEAM, email_id))
        assert record is not None
        return record

    def last_event(self, email_id: str) -> str:
        return self.record(email_id).last_event

    def events(self, email_id: str) -> list[str]:
        return [event.type for event in email_events(self.spool, TEAM, email_id)]

    def now_ms(self) -> int:
        return int(self.clock[0].timestamp() * 1000)

    async def until(self, condition: Callable[[], bool]) -> None:
        with trio.fail_after(20):
            while not condition():
                await trio.sleep(0.02)

    async def idle_rounds(self, rounds: int = 5) -> None:
        """Wake the engine several times and let each lease round run (nothing is due)."""
        for _ in range(rounds):
            self.engine.wake()
            await trio.sleep(0.05)


@asynccontextmanager
async def engine_for(
    tmp_path: Path,
    routes: dict[str, str] | None = None,
    *,
    tls: str = "opportunistic",
    environ: dict[str, str] | None = None,
) -> AsyncIterator[Harness]:
    config: Config = load_config(
        None,
        {"POSTWIRE_DATA_DIR": str(tmp_path), "POSTWIRE_DELIVERY_ROUTES": json.dumps(routes or {}),
         "POSTWIRE_DELIVERY_HELO_NAME": "mta.sender.test", **(environ or {})},
    )  # fmt: skip
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    clock = [datetime.now(UTC)]
    connections: list[tuple[str, int, SmtpConnection]] = []

    async def connect(host: str, port: int, **kwargs: Any) -> SmtpConnection:
        connection = await open_smtp_connection(host, port, **kwargs)
        connections.append((host, port, connection))
        return connection

    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        domain = await domain_store.create_domain(spool, config, TEAM, "sender.test")
        domain = dataclasses.replace(domain, status="verified", tls=tls)
        batch = _core.WriteBatch()
        domain_store.DOMAINS.put(batch, f"domain/{TEAM}/{domain.id}", domain)
        await spool.commit(batch)
        engine = DeliveryEngine(
            config, spool, MxResolver(config), now=lambda: clock[0], connect=connect
        )
        await engine.recover()
        stopping = trio.Event()
        nursery.start_soon(engine.run, stopping)
        yield Harness(spool, engine, Acceptor(spool), clock, connections)
        stopping.set()
        with trio.fail_after(20):
            while engine.in_hand:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    await spool.close()


async def received(receiver: ScriptedSmtpReceiver) -> list[ReceivedMessage]:
    return await trio.to_thread.run_sync(receiver.received)


def route(receiver: ScriptedSmtpReceiver) -> str:
    return f"{receiver.host}:{receiver.port}"


# --- scheduled mail -----------------------------------------------------------------------------


async def test_scheduled_mail_waits_for_its_time_cancel_and_reschedule(
    tmp_path: Path, smtp_receiver
) -> None:
    receiver = smtp_receiver()
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        start = harness.clock[0]
        at = start + timedelta(hours=1)
        kept = await harness.send(["kept@example.org"], scheduled_at=at)
        canceled = await harness.send(["canceled@example.org"], scheduled_at=at)
        moved = await harness.send(["moved@example.org"], scheduled_at=at)
        assert [harness.last_event(i) for i in (kept, canceled, moved)] == ["scheduled"] * 3

        await harness.idle_rounds()
        assert await received(receiver) == [], "nothing goes before its time"
        assert receiver.transactions_seen == 0

        harness.clock[0] = start + timedelta(minutes=30)
        await cancel_email(harness.spool, harness.record(canceled), harness.now_ms())
        later = start + timedelta(hours=2)
        await reschedule_email(
            harness.spool,
            harness.record(moved),
            contract_timestamp(later),
            int(later.timestamp() * 1000),
            harness.now_ms(),
        )
        await harness.idle_rounds()
        assert await received(receiver) == []

        # Past the first time: only the kept email goes.
        harness.clock[0] = at + timedelta(minutes=1)
        harness.engine.wake()
        await harness.until(lambda: harness.last_event(kept) == "delivered")
        await harness.idle_rounds()
        assert [m.rcpt_tos for m in await received(receiver)] == [["kept@example.org"]]
        assert harness.last_event(canceled) == "canceled"
        assert harness.last_event(moved) == "scheduled"
        assert harness.events(canceled) == [] and harness.events(moved) == []

        # Past the new time: the rescheduled email goes; the canceled one never does.
        harness.clock[0] = later + timedelta(minutes=1)
        harness.engine.wake()
        await harness.until(lambda: harness.last_event(moved) == "delivered")
        await harness.idle_rounds()
        assert harness.events(moved) == ["email.sent", "email.delivered"]
        assert harness.last_event(canceled) == "canceled"
        assert harness.spool.message_body(canceled) is None
    rcpts = sorted(m.rcpt_tos[0] for m in await received(receiver))
    assert rcpts == ["kept@example.org", "moved@example.org"]


# --- a tarpit beside a fast site ----------------------------------------------------------------


async def test_a_tarpitting_site_does_not_slow_another(tmp_path: Path, smtp_receiver) -> None:
    slow = smtp_receiver(delay_data_end_seconds=3.0)
    fast = smtp_receiver()
    count = 4
    routes = {"slow.example": route(slow), "fast.example": route(fast)}
    async with engine_for(tmp_path, routes) as harness:
        # The slow site's mail is accepted first, so it is leased first.
        slow_ids = [await harness.send([f"a{i}@slow.example"]) for i in range(count)]
        fast_ids = [await harness.send([f"b{i}@fast.example"]) for i in range(count)]
        await harness.until(lambda: all(harness.last_event(i) == "delivered" for i in fast_ids))
        assert len(await received(fast)) == count
        slow_so_far = len(await received(slow))
        assert slow_so_far < count, "the fast site finished while the slow one still held mail"
        # The slow site has its mail in hand meanwhile: a transaction is open there.
        await harness.until(lambda: slow.transactions_seen >= 1)
        assert len(await received(slow)) < count
        # Let the rest through quickly; whatever is already in DATA finishes at its own pace.
        slow.script.delay_data_end_seconds = 0
        await harness.until(lambda: all(harness.last_event(i) == "delivered" for i in slow_ids))
    assert len(await received(slow)) == count


# --- TLS policies -------------------------------------------------------------------------------


async def test_enforced_tls_without_starttls_is_delayed_never_sent_in_clear(
    tmp_path: Path, smtp_receiver
) -> None:
    receiver = smtp_receiver()
    async with engine_for(tmp_path, {"example.org": route(receiver)}, tls="enforced") as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
        assert harness.events(email_id) == ["email.sent", "email.delivery_delayed"]
        (delayed,) = [
            e for e in email_events(harness.spool, TEAM, email_id)
            if e.type == "email.delivery_delayed"
        ]  # fmt: skip
        assert "tls" in delayed.data["diagnostic"].lower()
        state = harness.spool.message_state(email_id)
        assert state is not None and state.attempts == 1, "kept for a retry"
    assert await received(receiver) == []
    assert receiver.transactions_seen == 0, "no MAIL FROM in clear"


async def test_enforced_tls_with_an_unverifiable_certificate_is_delayed(
    tmp_path: Path, smtp_receiver
) -> None:
    receiver = smtp_receiver(starttls=True)
    async with engine_for(tmp_path, {"example.org": route(receiver)}, tls="enforced") as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
        assert harness.events(email_id) == ["email.sent", "email.delivery_delayed"]
        assert harness.spool.message_state(email_id) is not None
    assert await received(receiver) == []
    assert receiver.transactions_seen == 0


async def test_opportunistic_tls_delivers_over_starttls(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver(starttls=True)
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert [connection.tls_active for _, _, connection in harness.connections] == [True]
    (message,) = await received(receiver)
    assert message.rcpt_tos == ["ann@example.org"]


# --- MX records from a real DNS server ----------------------------------------------------------


async def test_mx_from_dns_null_mx_and_nxdomain(
    tmp_path: Path, smtp_receiver, dns_server: AuthoritativeDnsServer
) -> None:
    receiver = smtp_receiver()
    dns_server.publish("mx-example.test", "MX", "10 mx1.mx-example.test.")
    dns_server.publish("mx1.mx-example.test", "A", "127.0.0.1")
    dns_server.publish("nullmx-example.test", "MX", "0 .")
    dns_server.publish("nullmx-example.test", "A", "127.0.0.1")  # no implicit MX either
    environ = {
        "POSTWIRE_DNS_NAMESERVERS": dns_server.nameserver,
        "POSTWIRE_DELIVERY_PORT": str(receiver.port),
    }
    async with engine_for(tmp_path, environ=environ) as harness:
        delivered = await harness.send(["ann@mx-example.test"])
        await harness.until(lambda: harness.last_event(delivered) == "delivered")
        assert [(host, port) for host, port, _ in harness.connections] == [
            ("mx1.mx-example.test", receiver.port)
        ]

        for address in ("bob@nullmx-example.test", "eve@nowhere-example.test"):
            email_id = await harness.send([address])
            await harness.until(lambda: harness.last_event(email_id) == "bounced")  # noqa: B023
            events = email_events(harness.spool, TEAM, email_id)
            assert [event.type for event in events] == ["email.sent", "email.bounced"]
            assert events[1].data["bounce"]["type"] == "Permanent", address
            assert harness.spool.message_body(email_id) is None, "finished, not retried"
        assert len(harness.connections) == 1, "no connection for a null MX or NXDOMAIN"
    (message,) = await received(receiver)
    assert message.rcpt_tos == ["ann@mx-example.test"]
