"""The webhook fan-out reads a pass's events and emails with their round trips overlapping
(a bounded number waiting at once), and turns them into the same messages, in the outbox's
order, as one read after another did. A real spool; its parked reads are made to wait a few
scheduling rounds, as they do on a table store on the network."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.concurrency import in_order
from postwire.config import load_config
from postwire.store.deliveries import OUTBOX, add_event
from postwire.store.emails import EMAILS, email_key
from postwire.store.spool import Spool
from postwire.webhooks.dispatcher import READS_AT_ONCE, WebhookDispatcher
from postwire.webhooks.messages import WEBHOOK_MESSAGES, message_key
from postwire.webhooks.signing import new_signing_secret
from postwire.webhooks.store import WEBHOOKS, WebhookRecord, webhook_key
from tests.integration.test_webhook_dispatch import TEAM, email_record

EVENTS_IN_PASS = 3 * READS_AT_ONCE


class Overlap:
    """Makes each parked read wait `rounds` scheduling rounds; counts those waiting at once."""

    def __init__(self, spool: Spool, rounds: int = 3) -> None:
        self.waiting = self.most_waiting = 0
        read = spool.aget

        async def aget(table: str, key: bytes) -> bytes | None:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
            for _ in range(rounds):
                await trio.lowlevel.checkpoint()
            self.waiting -= 1
            return await read(table, key)

        spool.aget = aget  # type: ignore[method-assign]


def enabled_webhook(events: list[str]) -> WebhookRecord:
    """An enabled endpoint of the test team taking `events`."""
    return WebhookRecord(
        id=_core.new_id(),
        team_id=TEAM,
        endpoint="https://hooks.example.com/in",
        events=events,
        status="enabled",
        created_at="2026-11-23 10:00:00.000000+00",
        signing_secret=new_signing_secret(),
    )


async def test_a_pass_reads_its_events_overlapping_and_keeps_their_order(
    spool: Spool, tmp_path: Path
) -> None:
    hook = enabled_webhook(["email.delivered", "contact.created"])
    batch = _core.WriteBatch()
    WEBHOOKS.put(batch, webhook_key(TEAM, hook.id), hook)
    email_ids = [_core.new_id() for _ in range(EVENTS_IN_PASS)]
    kinds = ["email.delivered", "email.opened", "contact.created"]  # opened: nobody wants it
    events = []
    for index, email_id in enumerate(email_ids):
        EMAILS.put(batch, email_key(TEAM, email_id), email_record(email_id))
        kind = kinds[index % len(kinds)]
        events.append(add_event(batch, TEAM, email_id, kind, 1_000 + index, to="a@example.org"))
    await spool.commit(batch)
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    overlap = Overlap(spool)

    assert not await WebhookDispatcher(config, spool).fan_out()

    assert 1 < overlap.most_waiting <= READS_AT_ONCE
    assert OUTBOX.scan(spool) == []
    for event in events:
        message = WEBHOOK_MESSAGES.get(spool, message_key(TEAM, hook.id, event.id))
        if event.type == "email.opened":
            assert message is None
            continue
        assert message is not None and message.event_type == event.type
        data = json.loads(message.payload)["data"]
        if event.type == "email.delivered":  # its email read beside it
            assert data["email_id"] == event.email_id and data["subject"] == "Order 1"


async def test_in_order_keeps_the_order_bounds_the_waiting_and_raises_the_error() -> None:
    waiting = most_waiting = 0

    def waits(rounds: Callable[[int], int]) -> Callable[[int], Awaitable[int]]:
        async def run(item: int) -> int:
            nonlocal waiting, most_waiting
            waiting += 1
            most_waiting = max(most_waiting, waiting)
            for _ in range(rounds(item)):
                await trio.lowlevel.checkpoint()
            waiting -= 1
            if item < 0:
                raise ValueError(f"item {item}")
            return item * 10

        return run

    # Later items finish first: the results still come in the items' order.
    items = list(range(20))
    assert await in_order(waits(lambda item: 40 - item), items, at_once=4) == [
        item * 10 for item in items
    ]
    assert most_waiting == 4
    with pytest.raises(ValueError, match="item -1"):  # bare, not in an exception group
        await in_order(waits(lambda item: 1), [3, -1, 4, 5], at_once=2)
