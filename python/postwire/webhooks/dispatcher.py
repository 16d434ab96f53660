"""The webhook dispatcher: from the outbox to signed POSTs, with retries.

Every event enters the `outbox` table in the commit that records it. The dispatcher takes
outbox entries in order and, in one commit per pass, turns each into one message per
subscribed endpoint (the body built once, so every attempt and replay signs the same bytes)
and deletes the entries. Messages wait in a due index per endpoint; each endpoint gets at most
`PER_ENDPOINT` POSTs at a time, so a slow or dead endpoint never holds up another. An attempt
is recorded in the commit that reschedules or finishes its message: after a crash, a message
is tried again (at least once), with the same `svix-id` for receivers to deduplicate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Final

import trio

from postwire._core import WriteBatch
from postwire.concurrency import in_order
from postwire.config import Config
from postwire.errors import SpoolError, StoreUnavailableError
from postwire.metrics.operator_registry import OPERATOR_METRICS
from postwire.outbound_http import RefusedTarget, parse_http_url
from postwire.store.deliveries import EVENTS, OUTBOX, EventRecord, OutboxEntry, event_key
from postwire.store.emails import EMAILS, EmailRecord, email_key
from postwire.store.outages import Outage
from postwire.store.spool import Spool, wall_clock_ms
from postwire.webhooks.http_post import HttpPostError, WebhookPoster
from postwire.webhooks.messages import (
    WEBHOOK_DUE,
    WEBHOOK_MESSAGES,
    WebhookAttempt,
    WebhookMessage,
    due_at_ms,
    due_prefix,
    message_key,
    replace_message,
)
from postwire.webhooks.payloads import is_email_event, webhook_payload
from postwire.webhooks.retry_policy import next_attempt_ms, should_disable
from postwire.webhooks.signing import signed_headers
from postwire.webhooks.store import WEBHOOKS, WebhookRecord, subscribers

if TYPE_CHECKING:
    from postwire.services import ServiceDeps

log = logging.getLogger("postwire.webhooks")

PER_ENDPOINT: Final = 8  # concurrent POSTs to one endpoint
MAX_RECORDING: Final = 64  # outcomes of one endpoint being committed, before its POSTs wait
OUTBOX_PASS: Final = 500  # outbox entries fanned out per commit
READS_AT_ONCE: Final = 16  # outbox entries of a pass whose reads wait at a time
ATTEMPT_TIMEOUT_SECONDS: Final = 15.0  # connection, request and response together
IDLE_POLL_SECONDS: Final = 0.2  # events are written by many services; none of them wakes us
USER_AGENT: Final = "Postwire-Webhooks/1"


@dataclass(frozen=True, slots=True)
class PostOutcome:
    status_code: int | None
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True, slots=True)
class Subscribed:
    """An outbox entry's event, its email (for an email event), and the endpoints that want it."""

    event: EventRecord
    email: EmailRecord | None
    hooks: list[WebhookRecord]


Poster = Callable[[WebhookRecord, WebhookMessage, int], Awaitable[PostOutcome]]


class WebhookDispatcher:
    """Owns the outbox fan-out and every POST in flight; `wake()` after writing messages."""

    def __init__(
        self,
        config: Config,
        spool: Spool,
        *,
        now_ms: Callable[[], int] = wall_clock_ms,
        post: Poster | None = None,
    ) -> None:
        self.config = config
        self.spool = spool
        self.now_ms = now_ms
        self.post: Poster = post if post is not None else self._post
        self._woken = trio.Event()
        # Webhook key -> message keys being POSTed (they take the endpoint's slots), and
        # those whose outcome is being committed (the next POSTs need not wait for that fsync).
        self._posting: dict[str, set[str]] = {}
        self._recording: dict[str, set[str]] = {}
        self._poster: WebhookPoster | None = None
        self._outage = Outage("webhook dispatch")

    def wake(self) -> None:
        self._woken.set()

    async def run(self, stopping: trio.Event) -> None:
        """Fan out and send until `stopping`; then finish the POSTs in flight and return."""
        self._poster = WebhookPoster(allow_private=self.config.webhooks.allow_private_targets)
        try:
            async with trio.open_nursery() as nursery:
                while not stopping.is_set():
                    try:
                        more = await self.fan_out()
                        self.start_due(nursery)
                    except StoreUnavailableError as exc:  # the outbox waits for the database
                        await self._outage.wait(exc, stopping)
                        continue
                    except SpoolError as exc:  # full, say: the outbox waits for the next pass
                        log.warning("webhook events were not fanned out: %s", exc)
                        more = False
                        self.start_due(nursery)
                    self._outage.succeeded()
                    if more:
                        continue
                    with trio.move_on_after(IDLE_POLL_SECONDS):
                        await self._woken.wait()
                    self._woken = trio.Event()
        finally:
            await self._poster.aclose()

    async def fan_out(self) -> bool:
        """Turn one pass of outbox entries into messages; True if more are waiting."""
        rows = await OUTBOX.ascan(self.spool, limit=OUTBOX_PASS)
        if not rows:
            return False
        batch = WriteBatch()
        now = self.now_ms()
        by_kind: dict[tuple[str, str], list[WebhookRecord]] = {}

        def hooks_for(team_id: str, event_type: str) -> list[WebhookRecord]:
            """The team's endpoints taking `event_type`, read once a pass."""
            if (team_id, event_type) not in by_kind:
                by_kind[team_id, event_type] = subscribers(self.spool, team_id, event_type)
            return by_kind[team_id, event_type]

        async def read(row: tuple[str, OutboxEntry]) -> Subscribed | None:
            """The entry's event and, for an email event, its email; None if nobody wants it."""
            event_id, entry = row
            if entry.event_type and not hooks_for(entry.team_id, entry.event_type):
                return None  # nobody takes it: not even read
            event = await EVENTS.aget(self.spool, event_key(entry.team_id, event_id))
            if event is None:
                return None
            hooks = hooks_for(event.team_id, event.type)
            if not hooks:
                return None
            email = None
            if is_email_event(event.type):
                email = await EMAILS.aget(self.spool, email_key(event.team_id, event.email_id))
            return Subscribed(event, email, hooks)

        # The entries' reads overlap (on a table store on the network, each is a round trip).
        found = await in_order(read, rows, at_once=READS_AT_ONCE)
        for (event_id, _), subscribed in zip(rows, found, strict=True):
            OUTBOX.delete(batch, event_id)
            if subscribed is None:
                continue
            event = subscribed.event
            payload = webhook_payload(event, subscribed.email).decode()
            for hook in subscribed.hooks:
                message = WebhookMessage(
                    id="msg_" + event.id.replace("-", ""),
                    team_id=event.team_id,
                    webhook_id=hook.id,
                    event_id=event.id,
                    event_type=event.type,
                    payload=payload,
                    created_at_ms=event.created_at_ms,
                    status="pending",
                    next_attempt_ms=now,
                )
                replace_message(batch, None, message)
        await self.spool.commit(batch)
        return len(rows) == OUTBOX_PASS

    def start_due(self, nursery: trio.Nursery) -> None:
        """Start the due messages of every enabled endpoint, up to its free slots."""
        now = self.now_ms()
        for key, hook in WEBHOOKS.scan(self.spool, limit=1_000_000):
            if hook.status != "enabled":
                continue
            posting = self._posting.setdefault(key, set())
            recording = self._recording.setdefault(key, set())
            free = PER_ENDPOINT - len(posting)
            if free <= 0 or len(recording) >= MAX_RECORDING:
                continue
            prefix = due_prefix(hook.team_id, hook.id)
            # Due entries of messages in hand are still there: look past them.
            limit = free + len(posting) + len(recording)
            for due_key, entry in WEBHOOK_DUE.scan(self.spool, prefix=prefix, limit=limit):
                if due_at_ms(due_key) > now or free <= 0:
                    break
                mkey = message_key(entry.team_id, entry.webhook_id, entry.event_id)
                if mkey in posting or mkey in recording:
                    continue
                posting.add(mkey)
                free -= 1
                nursery.start_soon(self._attempt, key, mkey)

    async def _attempt(self, hook_key: str, mkey: str) -> None:
        posting, recording = self._posting[hook_key], self._recording[hook_key]
        try:
            hook = WEBHOOKS.get(self.spool, hook_key)
            message = WEBHOOK_MESSAGES.get(self.spool, mkey)
            if hook is None or message is None or message.status != "pending":
                return
            started = self.now_ms()
            clock = time.monotonic()
            # Signed with the wall clock, whatever clock schedules: receivers check it against
            # theirs (5 minutes either way).
            outcome = await self.post(hook, message, int(time.time()))
            duration_ms = int((time.monotonic() - clock) * 1000)
            OPERATOR_METRICS.webhook_attempted(
                outcome.succeeded, message.created_at_ms, self.now_ms()
            )
            attempt = WebhookAttempt(started, duration_ms, outcome.status_code, outcome.error)
            recording.add(mkey)
            posting.discard(mkey)
            self.wake()  # the slot is free already
            try:
                await self._record(hook_key, hook, message, outcome, attempt)
            except StoreUnavailableError as exc:  # still pending: posted again later
                self._outage.failed(exc)
            except SpoolError as exc:  # full, say: still pending, so it is posted again later
                log.warning("webhook message %s: the attempt was not recorded: %s", mkey, exc)
        except StoreUnavailableError as exc:  # not begun: still pending, tried again later
            self._outage.failed(exc)
        finally:
            posting.discard(mkey)
            recording.discard(mkey)
            self.wake()

    async def _record(
        self,
        hook_key: str,
        hook: WebhookRecord,
        message: WebhookMessage,
        outcome: PostOutcome,
        attempt: WebhookAttempt,
    ) -> None:
        """Commit the attempt with the message's next state, and the endpoint's health when it
        changes. Attempts at one message never overlap (`_posting`, `_recording`), so only the
        endpoint's record is guarded, and only then. (A replay through the API is a guarded
        change of the endpoint too: one made during an attempt may be overwritten by the
        attempt's outcome.)"""
        now = self.now_ms()
        attempts = [*message.attempts, asdict(attempt)]
        if outcome.succeeded:
            updated = replace(message, attempts=attempts, status="succeeded")
        else:
            retry_at = next_attempt_ms(len(attempts), now)
            status = "pending" if retry_at is not None else "failed"
            updated = replace(message, attempts=attempts, status=status, next_attempt_ms=retry_at)
        batch = WriteBatch()
        replace_message(batch, message, updated)
        if _endpoint_health(hook, outcome.succeeded, now) == hook:
            await self.spool.commit(batch)
            return
        async for change in self.spool.guarded(hook_key):
            with change:
                guarded = batch.copy()  # a commit consumes its batch; a conflict runs this again
                current = WEBHOOKS.get(self.spool, hook_key)
                if current is not None:
                    health = _endpoint_health(current, outcome.succeeded, now)
                    WEBHOOKS.put(guarded, hook_key, health)
                    if health.status == "disabled" and current.status != "disabled":
                        log.warning("webhook %s disabled: failing for days", current.id)
                await self.spool.commit(guarded)

    async def _post(
        self, hook: WebhookRecord, message: WebhookMessage, timestamp: int
    ) -> PostOutcome:
        """POST the message to the endpoint through the SSRF guard, signed for `timestamp`."""
        assert self._poster is not None
        url = parse_http_url(hook.endpoint)
        if url is None:
            return PostOutcome(None, "the endpoint is not an http or https URL")
        body = message.payload.encode()
        headers = signed_headers(hook.signing_secret, message.id, timestamp, body)
        headers |= {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        with trio.move_on_after(ATTEMPT_TIMEOUT_SECONDS):
            try:
                status = await self._poster.post(url, headers, body)
            except (RefusedTarget, HttpPostError) as failure:
                return PostOutcome(None, str(failure))
            if 200 <= status < 300:
                return PostOutcome(status, None)
            return PostOutcome(status, f"the endpoint answered {status}")
        return PostOutcome(None, f"no answer within {ATTEMPT_TIMEOUT_SECONDS:g} seconds")


def _endpoint_health(hook: WebhookRecord, succeeded: bool, now_ms: int) -> WebhookRecord:
    """The endpoint after an attempt: a success clears its failing streak; a failure starts
    one, and one that lasted days disables it."""
    if succeeded:
        return replace(hook, failing_since_ms=None)
    failing_since = hook.failing_since_ms if hook.failing_since_ms is not None else now_ms
    if hook.status == "enabled" and should_disable(failing_since, now_ms):
        return replace(
            hook, failing_since_ms=failing_since, status="disabled", disabled_reason="failing"
        )
    return replace(hook, failing_since_ms=failing_since)


async def serve_webhooks(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[WebhookDispatcher] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Dispatch webhook events until the stage stops.

    Owns the outbox fan-out and the POSTs in flight. When `deps.stopping` is set it starts no
    more POSTs and lets those in flight finish; cancelled, it drops them, and their messages,
    still due, are tried again at the next start.
    """
    dispatcher = WebhookDispatcher(config, deps.spool)
    task_status.started(dispatcher)
    await dispatcher.run(deps.stopping)
