"""What the dispatcher keeps per endpoint and event: the message (the signed body, the same at
every attempt, so a receiver can deduplicate by its `svix-id`), its attempts, and a due index.

Tables:
    webhook_messages  `{team_id}/{webhook_id}/{event_id}` -> WebhookMessage
    webhook_due       `{team_id}/{webhook_id}/{due_ms:016d}/{event_id}` -> DueEntry, for each
                      message waiting for an attempt: per endpoint in due order, so the
                      dispatcher serves each endpoint from its own queue and a slow one never
                      holds up another
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table


@dataclass(frozen=True, slots=True)
class WebhookAttempt:
    at_ms: int
    duration_ms: int
    status_code: int | None  # None: no HTTP response (refused, timed out, SSRF guard)
    error: str | None = None  # why it failed, when it did


@dataclass(frozen=True, slots=True)
class WebhookMessage:
    id: str  # the `svix-id`: "msg_" + the event id, stable across attempts and replays
    team_id: str
    webhook_id: str
    event_id: str
    event_type: str
    payload: str  # the JSON body exactly as POSTed
    created_at_ms: int
    status: str  # "pending" | "succeeded" | "failed"
    next_attempt_ms: int | None  # due entry, while pending
    attempts: list[dict[str, Any]] = field(default_factory=list)  # WebhookAttempt fields


@dataclass(frozen=True, slots=True)
class DueEntry:
    team_id: str
    webhook_id: str
    event_id: str


WEBHOOK_MESSAGES = Table("webhook_messages", WebhookMessage)
WEBHOOK_DUE = Table("webhook_due", DueEntry)


def message_key(team_id: str, webhook_id: str, event_id: str) -> str:
    return f"{team_id}/{webhook_id}/{event_id}"


def due_key(due_ms: int, entry: DueEntry) -> str:
    return f"{due_prefix(entry.team_id, entry.webhook_id)}{due_ms:016d}/{entry.event_id}"


def due_prefix(team_id: str, webhook_id: str) -> str:
    return f"{team_id}/{webhook_id}/"


def due_at_ms(key: str) -> int:
    """The due time in a `webhook_due` key."""
    return int(key.rsplit("/", 2)[1])


def put_message(batch: WriteBatch, spool: Spool, message: WebhookMessage) -> None:
    """Write `message` and keep its due entry in step: the old one goes, a new one comes
    while it is pending."""
    key = message_key(message.team_id, message.webhook_id, message.event_id)
    replace_message(batch, WEBHOOK_MESSAGES.get(spool, key), message)


def replace_message(
    batch: WriteBatch, previous: WebhookMessage | None, message: WebhookMessage
) -> None:
    """`put_message` for a caller that has just read the message (`previous`) or knows it new."""
    entry = DueEntry(message.team_id, message.webhook_id, message.event_id)
    if previous is not None and previous.next_attempt_ms is not None:
        WEBHOOK_DUE.delete(batch, due_key(previous.next_attempt_ms, entry))
    if message.status == "pending" and message.next_attempt_ms is not None:
        WEBHOOK_DUE.put(batch, due_key(message.next_attempt_ms, entry), entry)
    else:
        message = replace(message, next_attempt_ms=None)
    key = message_key(message.team_id, message.webhook_id, message.event_id)
    WEBHOOK_MESSAGES.put(batch, key, message)


def replayed(message: WebhookMessage, now_ms: int) -> WebhookMessage:
    """The message due again now, whatever became of it; its attempts are kept."""
    return replace(message, status="pending", next_attempt_ms=now_ms)


def webhook_messages(spool: Spool, team_id: str, webhook_id: str) -> list[WebhookMessage]:
    """The endpoint's messages, newest first."""
    rows = WEBHOOK_MESSAGES.scan(spool, prefix=f"{team_id}/{webhook_id}/", limit=1_000_000)
    return [message for _, message in reversed(rows)]


async def webhook_messages_parked(
    spool: Spool, team_id: str, webhook_id: str
) -> list[WebhookMessage]:
    """`webhook_messages`, parked rather than blocking on a table store on the network."""
    prefix = f"{team_id}/{webhook_id}/"
    rows = await WEBHOOK_MESSAGES.ascan(spool, prefix=prefix, limit=1_000_000)
    return [message for _, message in reversed(rows)]
