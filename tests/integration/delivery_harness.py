"""An in-process delivery engine on a real spool, for tests against real SMTP peers.

Mail is accepted through the same path as the API, from a domain marked verified directly (DNS
verification has tests of its own); `delivery.routes` and an injectable clock steer it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
from postwire.store.deliveries import email_events
from postwire.store.emails import EMAILS, EmailRecord, email_key
from postwire.store.spool import TABLES, Spool
from tests.smtp_receiver import ReceivedMessage, ScriptedSmtpReceiver

TEAM = "team-1"


@dataclass
class Harness:
    spool: Spool
    engine: DeliveryEngine
    acceptor: Acceptor
    clock: list[datetime]
    domain: domain_store.DomainRecord
    # Every SMTP connection the engine opened, as (host, port, connection).
    connections: list[tuple[str, int, SmtpConnection]] = field(default_factory=list)

    async def send(
        self,
        to: list[str],
        *,
        scheduled_at: datetime | None = None,
        subject: str = "Hello",
        text: str = "Hi!",
    ) -> str:
        body: dict[str, Any] = {
            "from": "Shop <shop@sender.test>", "to": to, "subject": subject, "text": text,
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
    map_size: int = 1 << 30,
) -> AsyncIterator[Harness]:
    config: Config = load_config(
        None,
        {"POSTWIRE_DATA_DIR": str(tmp_path), "POSTWIRE_DELIVERY_ROUTES": json.dumps(routes or {}),
         "POSTWIRE_DELIVERY_HELO_NAME": "mta.sender.test", **(environ or {})},
    )  # fmt: skip
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES), map_size=map_size))
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
        yield Harness(spool, engine, Acceptor(spool), clock, domain, connections)
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
