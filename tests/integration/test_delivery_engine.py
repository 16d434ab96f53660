"""The delivery engine against a real SMTP peer on loopback (the scripted aiosmtpd receiver),
with mail accepted through the same path as the API and routed by `delivery.routes`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dkim
import trio

from postwire import _core
from postwire.accept import Acceptor
from postwire.api.send_request import parse_send_request
from postwire.config import Config, load_config
from postwire.delivery.engine import DeliveryEngine
from postwire.delivery.resolver import MxResolver
from postwire.domains import store as domain_store
from postwire.store.deliveries import email_events, is_suppressed
from postwire.store.emails import EMAILS, email_key
from postwire.store.spool import TABLES, Spool
from tests.smtp_receiver import ScriptedSmtpReceiver

TEAM = "team-1"


@dataclass
class Harness:
    spool: Spool
    engine: DeliveryEngine
    acceptor: Acceptor
    domain: domain_store.DomainRecord
    clock: list[datetime]

    async def send(self, to: list[str], subject: str = "Hello") -> str:
        body = {"from": "Shop <shop@sender.test>", "to": to, "subject": subject, "text": "Hi!"}
        request = parse_send_request(body, now=self.clock[0])
        prepared = await self.acceptor.prepare(TEAM, None, request, self.clock[0])
        batch = _core.WriteBatch()
        self.acceptor.add_to_batch(batch, [prepared], self.clock[0])
        await self.spool.commit(batch)
        self.engine.wake()
        return prepared.record.id

    def last_event(self, email_id: str) -> str:
        record = EMAILS.get(self.spool, email_key(TEAM, email_id))
        assert record is not None
        return record.last_event

    def events(self, email_id: str) -> list[str]:
        return [event.type for event in email_events(self.spool, TEAM, email_id)]

    async def until(self, condition: Callable[[], bool]) -> None:
        with trio.fail_after(20):
            while not condition():
                await trio.sleep(0.02)


@asynccontextmanager
async def engine_for(tmp_path: Path, receiver: ScriptedSmtpReceiver) -> AsyncIterator[Harness]:
    routes = json.dumps({"example.org": f"{receiver.host}:{receiver.port}"})
    config: Config = load_config(
        None,
        {"POSTWIRE_DATA_DIR": str(tmp_path), "POSTWIRE_DELIVERY_ROUTES": routes,
         "POSTWIRE_DELIVERY_HELO_NAME": "mta.sender.test"},
    )  # fmt: skip
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    clock = [datetime.now(UTC)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        domain = await domain_store.create_domain(spool, config, TEAM, "sender.test")
        domain = dataclasses.replace(domain, status="verified")
        batch = _core.WriteBatch()
        domain_store.DOMAINS.put(batch, f"domain/{TEAM}/{domain.id}", domain)
        await spool.commit(batch)
        engine = DeliveryEngine(config, spool, MxResolver(config), now=lambda: clock[0])
        await engine.recover()
        stopping = trio.Event()
        nursery.start_soon(engine.run, stopping)
        yield Harness(spool, engine, Acceptor(spool), domain, clock)
        stopping.set()
        with trio.fail_after(20):
            while engine.in_hand:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    await spool.close()


async def test_delivered_bytes_verify_with_dkimpy(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver()
    async with engine_for(tmp_path, receiver) as harness:
        email_id = await harness.send(["ann@example.org", "bob@example.org"])
        body = harness.spool.message_body(email_id)
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert harness.events(email_id) == ["email.sent", "email.delivered", "email.delivered"]
        assert harness.spool.message_body(email_id) is None, "acked once everyone has it"
    (received,) = await trio.to_thread.run_sync(receiver.received)
    assert received.content == body, "the bytes on the wire are exactly the signed bytes"
    assert received.mail_from == f"bounces+{email_id}@send.sender.test"
    assert sorted(received.rcpt_tos) == ["ann@example.org", "bob@example.org"]
    txt = harness.domain.dkim_dns_txt.encode()
    assert dkim.verify(received.content, dnsfunc=lambda name, timeout=5: txt)


async def test_mixed_outcomes_bounce_and_suppress(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver(refuse_recipients={"gone@example.org": "550 5.1.1 No such user"})
    async with engine_for(tmp_path, receiver) as harness:
        email_id = await harness.send(["ann@example.org", "gone@example.org"])
        await harness.until(lambda: harness.spool.message_body(email_id) is None)
        events = email_events(harness.spool, TEAM, email_id)
        bounced = next(event for event in events if event.type == "email.bounced")
        assert bounced.data["to"] == "gone@example.org"
        assert bounced.data["bounce"]["type"] == "Permanent"
        assert "5.1.1" in bounced.data["bounce"]["diagnosticCode"][0]
        assert "email.delivered" in [event.type for event in events]
        assert is_suppressed(harness.spool, TEAM, "Gone@example.org")

        again = await harness.send(["gone@example.org"], subject="Again")
        await harness.until(lambda: harness.last_event(again) == "suppressed")
    assert len(await trio.to_thread.run_sync(receiver.received)) == 1, "no attempt to suppressed"


async def test_temporary_failure_is_retried_on_schedule(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver(defer_first_transactions=1)
    async with engine_for(tmp_path, receiver) as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
        state = harness.spool.message_state(email_id)
        assert state is not None and state.attempts == 1
        first_try = harness.clock[0]
        # The retry is due about five minutes later; nothing happens before that.
        assert state.due_at_ms >= int((first_try + timedelta(minutes=5)).timestamp() * 1000)
        harness.clock[0] = first_try + timedelta(minutes=6)
        harness.engine.wake()
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert harness.events(email_id) == [
            "email.sent",
            "email.delivery_delayed",
            "email.delivered",
        ]
    assert len(await trio.to_thread.run_sync(receiver.received)) == 1


async def test_an_expired_lease_in_hand_is_renewed_not_redelivered(
    tmp_path: Path, smtp_receiver, monkeypatch
) -> None:
    # A lease far shorter than the delivery: the loop sees the message due again while it is
    # still being sent, and must only renew the lease.
    monkeypatch.setattr("postwire.delivery.engine.LEASE_MS", 100)
    receiver = smtp_receiver(delay_data_end_seconds=1.0)
    async with engine_for(tmp_path, receiver) as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: email_id in harness.engine.in_hand)
        first_token = harness.engine.in_hand[email_id]
        harness.clock[0] += timedelta(seconds=1)  # the lease has now expired
        harness.engine.wake()
        in_hand = harness.engine.in_hand
        await harness.until(lambda: in_hand.get(email_id, first_token) != first_token)
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert harness.spool.message_body(email_id) is None, "acked with the renewed lease"
        assert harness.events(email_id) == ["email.sent", "email.delivered"]
    assert len(await trio.to_thread.run_sync(receiver.received)) == 1
