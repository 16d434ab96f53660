"""The webhook dispatcher on a real spool against real HTTP receivers on loopback: signatures
verified with `svix`, retries on an injected clock, one slow endpoint beside a fast one, the
SSRF guard, and an endpoint disabled after days of failures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from svix.webhooks import Webhook

from postwire import _core
from postwire.config import load_config
from postwire.store.deliveries import OUTBOX, add_event
from postwire.store.emails import EMAILS, EmailRecord, email_key
from postwire.store.spool import TABLES, Spool
from postwire.webhooks.dispatcher import PER_ENDPOINT, WebhookDispatcher
from postwire.webhooks.messages import WEBHOOK_MESSAGES, WebhookMessage, message_key
from postwire.webhooks.retry_policy import DISABLE_AFTER_MS, RETRY_DELAYS_MS
from postwire.webhooks.signing import new_signing_secret
from postwire.webhooks.store import WEBHOOKS, WebhookRecord, webhook_key
from tests.webhook_receiver import Answer, WebhookReceiver

TEAM = "team-1"
START_MS = 1_800_000_000_000


@pytest.fixture
def receivers() -> Iterator[Callable[..., WebhookReceiver]]:
    started: list[WebhookReceiver] = []

    def start(answer: Callable[[int], Answer] = lambda _: Answer()) -> WebhookReceiver:
        receiver = WebhookReceiver(answer)
        receiver.start()
        started.append(receiver)
        return receiver

    yield start
    for receiver in started:
        receiver.stop()


@dataclass
class Dispatch:
    spool: Spool
    dispatcher: WebhookDispatcher
    clock: list[int]

    async def endpoint(self, url: str, events: list[str] | None = None) -> WebhookRecord:
        hook = WebhookRecord(
            id=_core.new_id(),
            team_id=TEAM,
            endpoint=url,
            events=events or ["email.sent", "email.delivered", "email.bounced"],
            status="enabled",
            created_at="2026-11-23 10:00:00.000000+00",
            signing_secret=new_signing_secret(),
        )
        batch = _core.WriteBatch()
        WEBHOOKS.put(batch, webhook_key(TEAM, hook.id), hook)
        await self.spool.commit(batch)
        return hook

    async def events(self, count: int, kind: str = "email.delivered") -> list[str]:
        """Commit `count` events about one email; their ids."""
        email_id = _core.new_id()
        batch = _core.WriteBatch()
        EMAILS.put(batch, email_key(TEAM, email_id), email_record(email_id))
        ids = [
            add_event(batch, TEAM, email_id, kind, self.clock[0], to="ann@example.org").id
            for _ in range(count)
        ]
        await self.spool.commit(batch)
        self.dispatcher.wake()
        return ids

    def message(self, hook: WebhookRecord, event_id: str) -> WebhookMessage:
        found = WEBHOOK_MESSAGES.get(self.spool, message_key(TEAM, hook.id, event_id))
        assert found is not None
        return found

    def status(self, hook: WebhookRecord, event_id: str) -> str | None:
        """The message's status; None before the dispatcher made it."""
        found = WEBHOOK_MESSAGES.get(self.spool, message_key(TEAM, hook.id, event_id))
        return None if found is None else found.status

    def attempts(self, hook: WebhookRecord, event_id: str) -> int:
        found = WEBHOOK_MESSAGES.get(self.spool, message_key(TEAM, hook.id, event_id))
        return 0 if found is None else len(found.attempts)

    def hook(self, hook: WebhookRecord) -> WebhookRecord:
        found = WEBHOOKS.get(self.spool, webhook_key(TEAM, hook.id))
        assert found is not None
        return found

    async def until(self, condition: Callable[[], bool], timeout: float = 20) -> None:
        with trio.fail_after(timeout):
            while not condition():
                await trio.sleep(0.02)

    async def advance(self, ms: int) -> None:
        self.clock[0] += ms
        self.dispatcher.wake()


def email_record(email_id: str) -> EmailRecord:
    return EmailRecord(
        id=email_id,
        team_id=TEAM,
        domain_id="domain-1",
        sender="Shop <shop@sender.test>",
        to=["ann@example.org"],
        subject="Order 1",
        message_id=f"<{email_id}@sender.test>",
        created_at="2026-11-23 10:00:00.123000+00",
        last_event="delivered",
        envelope_from=f"bounces+{email_id}@send.sender.test",
        recipients=["ann@example.org"],
        tags=[{"name": "category", "value": "orders"}],
    )


@asynccontextmanager
async def dispatching(tmp_path: Path, *, allow_private: bool = True) -> AsyncIterator[Dispatch]:
    config = load_config(
        None,
        {
            "POSTWIRE_DATA_DIR": str(tmp_path),
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true" if allow_private else "false",
        },
    )
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    clock = [START_MS]
    dispatcher = WebhookDispatcher(config, spool, now_ms=lambda: clock[0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        stopping = trio.Event()
        done = trio.Event()

        async def run() -> None:
            await dispatcher.run(stopping)
            done.set()

        nursery.start_soon(run)
        yield Dispatch(spool, dispatcher, clock)
        stopping.set()
        with trio.fail_after(20):
            await done.wait()
        nursery.cancel_scope.cancel()
    await spool.close()


def verified(hook: WebhookRecord, post: Any) -> dict[str, Any]:
    """The body of a received POST, once `svix` has verified its signature."""
    Webhook(hook.signing_secret).verify(post.body, post.headers)
    body: dict[str, Any] = json.loads(post.body)
    return body


async def test_events_reach_subscribers_signed_once_each(tmp_path: Path, receivers) -> None:
    receiver = receivers()
    other_kinds = receivers()
    async with dispatching(tmp_path) as dispatch:
        hook = await dispatch.endpoint(receiver.url)
        await dispatch.endpoint(other_kinds.url, events=["email.opened"])
        (event_id,) = await dispatch.events(1)
        await dispatch.until(lambda: dispatch.status(hook, event_id) == "succeeded")
        (post,) = receiver.posts()
        assert post.headers["svix-id"] == "msg_" + event_id.replace("-", "")
        assert post.headers["Content-Type"] == "application/json"
        body = verified(hook, post)
        assert body["type"] == "email.delivered"
        assert body["created_at"].endswith("Z")
        data = body["data"]
        assert data["from"] == "Shop <shop@sender.test>"
        assert data["to"] == ["ann@example.org"]
        assert data["subject"] == "Order 1"
        assert data["tags"] == {"category": "orders"}
        assert data["created_at"] == "2026-11-23T10:00:00.123Z"
        assert data["message_id"].startswith("<")
        (attempt,) = dispatch.message(hook, event_id).attempts
        assert attempt["status_code"] == 200 and attempt["error"] is None
        assert OUTBOX.scan(dispatch.spool) == []
    assert other_kinds.posts() == []


async def test_failures_are_retried_on_schedule_then_succeed(tmp_path: Path, receivers) -> None:
    # 500, a hang-up, then success.
    answers = [Answer(status=500), Answer(hang_up=True)]
    receiver = receivers(lambda n: answers[n] if n < len(answers) else Answer())
    async with dispatching(tmp_path) as dispatch:
        hook = await dispatch.endpoint(receiver.url)
        (event_id,) = await dispatch.events(1)
        await dispatch.until(lambda: dispatch.attempts(hook, event_id) == 1)
        message = dispatch.message(hook, event_id)
        assert message.status == "pending"
        assert message.next_attempt_ms == START_MS + RETRY_DELAYS_MS[0]
        assert message.attempts[0]["error"] == "the endpoint answered 500"
        assert dispatch.hook(hook).failing_since_ms == START_MS

        await trio.sleep(0.3)
        assert len(receiver.posts()) == 1, "nothing before the retry is due"
        await dispatch.advance(RETRY_DELAYS_MS[0])
        await dispatch.until(lambda: dispatch.attempts(hook, event_id) == 2)
        message = dispatch.message(hook, event_id)
        assert message.attempts[1]["status_code"] is None
        assert message.next_attempt_ms == dispatch.clock[0] + RETRY_DELAYS_MS[1]

        await dispatch.advance(RETRY_DELAYS_MS[1])
        await dispatch.until(lambda: dispatch.status(hook, event_id) == "succeeded")
        assert dispatch.hook(hook).failing_since_ms is None
    posts = receiver.posts()
    assert len(posts) == 3
    assert len({post.headers["svix-id"] for post in posts}) == 1, "one id for every attempt"
    assert len({post.body for post in posts}) == 1, "the same bytes every time"
    for post in posts:
        verified(hook, post)


async def test_retries_run_out_and_the_message_is_kept_failed(tmp_path: Path, receivers) -> None:
    receiver = receivers(lambda _: Answer(status=503))
    async with dispatching(tmp_path) as dispatch:
        hook = await dispatch.endpoint(receiver.url)
        (event_id,) = await dispatch.events(1)
        for attempt, delay in enumerate(RETRY_DELAYS_MS, start=1):
            await dispatch.until(lambda n=attempt: dispatch.attempts(hook, event_id) == n)
            await dispatch.advance(delay)
        await dispatch.until(lambda: dispatch.status(hook, event_id) == "failed")
        assert dispatch.attempts(hook, event_id) == len(RETRY_DELAYS_MS) + 1
        assert dispatch.hook(hook).status == "enabled", "1.2 days of failures is not yet days"


async def test_an_endpoint_failing_for_days_is_disabled(tmp_path: Path, receivers) -> None:
    receiver = receivers(lambda _: Answer(status=500))
    async with dispatching(tmp_path) as dispatch:
        hook = await dispatch.endpoint(receiver.url)
        (first,) = await dispatch.events(1)
        await dispatch.until(lambda: dispatch.attempts(hook, first) == 1)
        await dispatch.advance(DISABLE_AFTER_MS)
        await dispatch.events(1)
        await dispatch.until(lambda: dispatch.hook(hook).status == "disabled")
        assert dispatch.hook(hook).disabled_reason == "failing"
        count = len(receiver.posts())
        await dispatch.events(1)
        await trio.sleep(0.5)
        assert len(receiver.posts()) == count, "a disabled endpoint gets nothing"


async def test_a_slow_endpoint_does_not_hold_up_another(tmp_path: Path, receivers) -> None:
    slow = receivers(lambda _: Answer(delay=2.0))
    fast = receivers()
    async with dispatching(tmp_path) as dispatch:
        await dispatch.endpoint(slow.url)
        await dispatch.endpoint(fast.url)
        await dispatch.events(40)
        await dispatch.until(lambda: len(fast.posts()) == 40, timeout=10)
        assert len(slow.posts()) <= PER_ENDPOINT, "a bounded number at a time to one endpoint"


async def test_private_targets_are_refused_without_the_setting(tmp_path: Path, receivers) -> None:
    receiver = receivers()
    async with dispatching(tmp_path, allow_private=False) as dispatch:
        hook = await dispatch.endpoint(receiver.url)
        (event_id,) = await dispatch.events(1)
        await dispatch.until(lambda: dispatch.attempts(hook, event_id) == 1)
        error = dispatch.message(hook, event_id).attempts[0]["error"]
        assert error == "the host `127.0.0.1` is a private, loopback or reserved address"
    assert receiver.posts() == []
