"""`/webhooks/{id}/events` on a real spool: messages written the way the dispatcher writes them,
read, replayed and deleted through the app with a real API key of each of two teams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio
from quart import typing as quart_typing

from postwire import _core
from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.config import load_config
from postwire.store import accounts
from postwire.store.spool import TABLES, Spool
from postwire.webhooks import messages
from postwire.webhooks.messages import WEBHOOK_DUE, WEBHOOK_MESSAGES, DueEntry, WebhookMessage
from postwire.webhooks.store import WEBHOOKS, webhook_key

NOW = datetime(2027, 3, 1, 12, 0, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


@dataclass
class Waker:
    """Stands in for the dispatcher's handle: counts how often it is woken."""

    woken: int = 0

    def wake(self) -> None:
        self.woken += 1


@dataclass
class Api:
    spool: Spool
    client: quart_typing.TestClientProtocol
    waker: Waker
    headers: dict[str, str]
    stranger: dict[str, str]
    team_id: str
    written: list[WebhookMessage] = field(default_factory=list)

    async def call(
        self, method: str, path: str, *, as_stranger: bool = False, **kwargs: Any
    ) -> tuple[int, Any]:
        headers = self.stranger if as_stranger else self.headers
        response = await self.client.open(path, method=method, headers=headers, **kwargs)
        return response.status_code, await response.get_json()


@asynccontextmanager
async def running_api(tmp_path: Path) -> AsyncIterator[Api]:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
        waker = Waker()
        app = create_app(ApiContext(config=config, spool=spool, now=lambda: NOW, webhooks=waker))
        tokens = []
        for name in ("mine", "theirs"):
            team = await accounts.create_team(spool, name, NOW)
            _, token = await accounts.create_api_key(spool, team.id, name, "full_access", None, NOW)
            tokens.append((team.id, {"Authorization": f"Bearer {token}"}))
        (team_id, headers), (_, stranger) = tokens
        async with app.test_app():
            yield Api(spool, app.test_client(), waker, headers, stranger, team_id)
        nursery.cancel_scope.cancel()
    await spool.close()


async def write_message(api: Api, webhook_id: str, status: str, **fields: Any) -> WebhookMessage:
    event_id = _core.new_id()
    payload = {"type": "email.sent", "created_at": "2027-03-01T11:00:00.000Z", "data": {"n": 1}}
    message = WebhookMessage(
        id=f"msg_{event_id}",
        team_id=api.team_id,
        webhook_id=webhook_id,
        event_id=event_id,
        event_type="email.sent",
        payload=json.dumps(payload),
        created_at_ms=NOW_MS - 60_000 + len(api.written),
        status=status,
        **{"next_attempt_ms": None, **fields},
    )
    batch = _core.WriteBatch()
    messages.put_message(batch, api.spool, message)
    await api.spool.commit(batch)
    api.written.append(message)
    return message


def attempt(at_ms: int, status_code: int | None, error: str | None = None) -> dict[str, Any]:
    return {"at_ms": at_ms, "duration_ms": 42, "status_code": status_code, "error": error}


async def test_events_of_an_endpoint_read_replay_and_go_with_it(tmp_path: Path) -> None:
    async with running_api(tmp_path) as api:
        status, created = await api.call(
            "POST",
            "/webhooks",
            json={"endpoint": "https://hooks.example.com/in", "events": ["email.sent"]},
        )
        assert status == 201, created
        hook = created["id"]
        succeeded = await write_message(
            api, hook, "succeeded", attempts=[attempt(NOW_MS - 50_000, 204)]
        )
        failed = await write_message(
            api,
            hook,
            "failed",
            attempts=[attempt(NOW_MS - 40_000, 500), attempt(NOW_MS - 30_000, None, "timed out")],
        )
        pending = await write_message(
            api, hook, "pending", next_attempt_ms=NOW_MS + 5_000, attempts=[]
        )

        status, listed = await api.call("GET", f"/webhooks/{hook}/events")
        assert status == 200 and listed["object"] == "list" and listed["has_more"] is False
        assert [e["id"] for e in listed["data"]] == [
            pending.event_id,
            failed.event_id,
            succeeded.event_id,
        ]
        assert listed["data"][0] == {
            "object": "webhook_event",
            "id": pending.event_id,
            "type": "email.sent",
            "status": "pending",
            "created_at": "2027-03-01 11:59:00.002000+00",
            "attempts": 0,
            "next_attempt_at": "2027-03-01 12:00:05.000000+00",
        }
        assert [e["status"] for e in listed["data"]] == ["pending", "failed", "success"]
        assert [e["attempts"] for e in listed["data"]] == [0, 2, 1]
        assert listed["data"][1]["next_attempt_at"] is None

        status, first = await api.call("GET", f"/webhooks/{hook}/events?limit=2")
        assert [e["id"] for e in first["data"]] == [pending.event_id, failed.event_id]
        assert first["has_more"] is True
        _, rest = await api.call("GET", f"/webhooks/{hook}/events?after={failed.event_id}")
        assert [e["id"] for e in rest["data"]] == [succeeded.event_id]
        status, bad = await api.call("GET", f"/webhooks/{hook}/events?limit=101")
        assert (status, bad["name"]) == (422, "validation_error")

        status, detail = await api.call("GET", f"/webhooks/{hook}/events/{failed.event_id}")
        assert status == 200
        assert detail["payload"] == json.loads(failed.payload)
        assert detail["attempts"] == [
            {
                "attempted_at": "2027-03-01 11:59:20.000000+00",
                "status_code": 500,
                "error": None,
                "duration_ms": 42,
            },
            {
                "attempted_at": "2027-03-01 11:59:30.000000+00",
                "status_code": None,
                "error": "timed out",
                "duration_ms": 42,
            },
        ]
        # The svix-id a receiver saw names the same event.
        _, by_message_id = await api.call("GET", f"/webhooks/{hook}/events/{failed.id}")
        assert by_message_id == detail

        status, replayed = await api.call(
            "POST", f"/webhooks/{hook}/events/{failed.event_id}/replay"
        )
        assert status == 200
        assert replayed == {"object": "webhook_event", "id": failed.event_id, "status": "pending"}
        assert api.waker.woken == 1
        key = messages.message_key(api.team_id, hook, failed.event_id)
        stored = WEBHOOK_MESSAGES.get(api.spool, key)
        assert stored is not None
        assert (stored.status, stored.next_attempt_ms) == ("pending", NOW_MS)
        assert stored.attempts == failed.attempts, "a replay keeps the attempts made"
        entry = DueEntry(api.team_id, hook, failed.event_id)
        assert WEBHOOK_DUE.get(api.spool, messages.due_key(NOW_MS, entry)) == entry
        _, after_replay = await api.call("GET", f"/webhooks/{hook}/events/{failed.event_id}")
        assert after_replay["status"] == "pending"
        assert after_replay["next_attempt_at"] == "2027-03-01 12:00:00.000000+00"

        # A succeeded message can be replayed too; a pending one just becomes due now.
        for message in (succeeded, pending):
            status, _ = await api.call("POST", f"/webhooks/{hook}/events/{message.event_id}/replay")
            assert status == 200
        due = WEBHOOK_DUE.scan(api.spool, limit=100)
        assert sorted(entry.event_id for _, entry in due) == sorted(m.event_id for m in api.written)
        assert len(due) == 3, "the pending message's earlier due entry is gone"

        missing = f"/webhooks/{hook}/events/{_core.new_id()}"
        for method, path in (("GET", missing), ("POST", f"{missing}/replay")):
            status, body = await api.call(method, path)
            assert (status, body["name"]) == (404, "not_found")

        # Another team sees none of it, whichever path it takes.
        for method, path in (
            ("GET", f"/webhooks/{hook}/events"),
            ("GET", f"/webhooks/{hook}/events/{failed.event_id}"),
            ("POST", f"/webhooks/{hook}/events/{failed.event_id}/replay"),
        ):
            status, body = await api.call(method, path, as_stranger=True)
            assert status == 404 and set(body) == {"statusCode", "name", "message"}
        assert api.waker.woken == 3

        # Deleting the endpoint takes its messages and their due entries in the same commit.
        status, deleted = await api.call("DELETE", f"/webhooks/{hook}")
        assert deleted == {"object": "webhook", "id": hook, "deleted": True}
        assert WEBHOOK_MESSAGES.scan(api.spool, limit=100) == []
        assert WEBHOOK_DUE.scan(api.spool, limit=100) == []
        status, body = await api.call("GET", f"/webhooks/{hook}/events")
        assert (status, body["name"]) == (404, "not_found")


async def test_reenabling_clears_what_the_dispatcher_recorded(tmp_path: Path) -> None:
    async with running_api(tmp_path) as api:
        _, created = await api.call(
            "POST",
            "/webhooks",
            json={"endpoint": "https://hooks.example.com/in", "events": ["email.bounced"]},
        )
        key = webhook_key(api.team_id, created["id"])
        record = WEBHOOKS.get(api.spool, key)
        assert record is not None
        # What the dispatcher leaves after days of failures.
        batch = _core.WriteBatch()
        disabled = replace(
            record, status="disabled", disabled_reason="failing", failing_since_ms=NOW_MS - 1
        )
        WEBHOOKS.put(batch, key, disabled)
        await api.spool.commit(batch)

        _, shown = await api.call("GET", f"/webhooks/{created['id']}")
        assert (shown["status"], shown["disabled_reason"]) == ("disabled", "failing")

        status, _ = await api.call(
            "PATCH", f"/webhooks/{created['id']}", json={"status": "enabled"}
        )
        assert status == 200
        record = WEBHOOKS.get(api.spool, key)
        assert record is not None
        assert (record.status, record.disabled_reason, record.failing_since_ms) == (
            "enabled",
            None,
            None,
        )
        _, shown = await api.call("GET", f"/webhooks/{created['id']}")
        assert "disabled_reason" not in shown
