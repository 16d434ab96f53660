"""An event no endpoint takes leaves the webhook outbox without being read: the outbox entry
names its type, and the team's endpoints are read once a pass. On a table store on the network
a read is a round trip, two a delivered message before any team had a webhook."""

from __future__ import annotations

from pathlib import Path

from postwire import _core
from postwire.config import load_config
from postwire.store.deliveries import EVENTS, OUTBOX, OutboxEntry, add_event
from postwire.store.spool import Spool
from postwire.webhooks.dispatcher import WebhookDispatcher
from postwire.webhooks.messages import WEBHOOK_MESSAGES, message_key
from postwire.webhooks.store import WEBHOOKS, webhook_key
from tests.integration.test_webhook_dispatch import TEAM
from tests.table_reads import record_reads
from tests.unit.test_fan_out_reads import enabled_webhook


async def test_events_nobody_takes_are_dropped_unread_and_the_wanted_are_sent(
    spool: Spool, tmp_path: Path
) -> None:
    hook = enabled_webhook(["contact.created"])
    batch = _core.WriteBatch()
    WEBHOOKS.put(batch, webhook_key(TEAM, hook.id), hook)
    unwanted = [
        add_event(batch, team, _core.new_id(), "email.delivered", 1_000 + n, to="a@example.org")
        for n, team in enumerate([TEAM, "01a20000-0000-7000-8000-00000000cafe"] * 5)
    ]
    wanted = add_event(batch, TEAM, _core.new_id(), "contact.created", 2_000)
    # An entry written before entries named their type: read, as it always was.
    older = add_event(batch, TEAM, _core.new_id(), "contact.created", 3_000)
    OUTBOX.put(batch, older.id, OutboxEntry(TEAM))
    await spool.commit(batch)
    reads = record_reads(spool, {EVENTS.name})

    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    assert not await WebhookDispatcher(config, spool).fan_out()

    assert sorted(read.key for read in reads) == sorted(
        f"{TEAM}/{event.id}" for event in (wanted, older)
    )
    assert OUTBOX.scan(spool) == []
    for event in (wanted, older):
        assert WEBHOOK_MESSAGES.get(spool, message_key(TEAM, hook.id, event.id)) is not None
    for event in unwanted:
        assert WEBHOOK_MESSAGES.get(spool, message_key(event.team_id, hook.id, event.id)) is None
