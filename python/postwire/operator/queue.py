"""`postwire queue list|show|retry|delete`: the delivery queue of a running service.

Messages are chosen by id, by destination (`--domain`: those waiting to retry for a recipient
there) or by age (`--older-than`); lists are pages (`--limit`, `--after`). Retry and delete go
through `store.delivery_queue`, on the spool the service's delivery workers lease from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from postwire.config import Config
from postwire.errors import PostwireError
from postwire.operator.output import format_age, iso_ms
from postwire.operator.store_access import opened_spool
from postwire.store.deliveries import email_attempts
from postwire.store.delivery_queue import (
    QueueChangeRefused,
    QueuedMessage,
    deliver_now,
    queued_message,
    queued_page,
    remove_queued,
    waiting_page,
)
from postwire.store.emails import EMAILS, email_key
from postwire.store.spool import Spool

# Messages read per page when a retry or delete takes every message a selection matches.
_BULK_PAGE = 500


@dataclass(frozen=True, slots=True)
class Selection:
    """Which queued messages a command is about."""

    ids: tuple[str, ...] = ()
    domain: str | None = None
    older_than_seconds: int | None = None

    @property
    def empty(self) -> bool:
        return not self.ids and self.domain is None and self.older_than_seconds is None


def select_page(
    spool: Spool, selection: Selection, now_ms: int, *, limit: int, after: str | None
) -> list[QueuedMessage]:
    """A page of the selected messages, oldest first."""
    if selection.ids:
        found = (queued_message(spool, message_id) for message_id in selection.ids)
        return [message for message in found if message is not None][:limit]
    before_ms = None
    if selection.older_than_seconds is not None:
        before_ms = now_ms - selection.older_than_seconds * 1000
    if selection.domain is not None:
        return waiting_page(
            spool, selection.domain, limit=limit, after=after, enqueued_before_ms=before_ms
        )
    return queued_page(spool, limit=limit, after=after, enqueued_before_ms=before_ms)


def message_row(spool: Spool, message: QueuedMessage, now_ms: int) -> dict[str, Any]:
    """One message as `queue list` shows it (and `--json` prints it)."""
    delivery, state = message.delivery, message.state
    record = None
    if not delivery.is_system:
        record = EMAILS.get(spool, email_key(delivery.team_id, message.id))
    return {
        "id": message.id,
        "status": message.status(now_ms),
        "team_id": None if delivery.is_system else delivery.team_id,
        "from": delivery.envelope_from,
        "subject": None if record is None else record.subject,
        "pending": delivery.pending,
        "attempts": state.attempts,
        "enqueued_at": iso_ms(state.enqueued_at_ms),
        "age_seconds": max(0, now_ms - state.enqueued_at_ms) // 1000,
        "next_attempt_at": iso_ms(state.due_at_ms),
    }


async def list_queue(
    config: Config, selection: Selection, limit: int, after: str | None
) -> list[dict[str, Any]]:
    async with opened_spool(config) as spool:
        now_ms = spool.clock_ms()
        page = select_page(spool, selection, now_ms, limit=limit, after=after)
        return [message_row(spool, message, now_ms) for message in page]


LIST_COLUMNS = [("id", "ID"), ("status", "STATUS"), ("age", "AGE"), ("attempts", "TRIES"),
                ("next_attempt_at", "NEXT ATTEMPT"), ("pending", "PENDING"),
                ("subject", "SUBJECT")]  # fmt: skip


def human_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "age": format_age(row["age_seconds"])} for row in rows]


async def show_message(config: Config, message_id: str) -> dict[str, Any]:
    """The message, its email and its delivery attempts (as `GET /emails/{id}` has them)."""
    async with opened_spool(config) as spool:
        now_ms = spool.clock_ms()
        message = queued_message(spool, message_id)
        if message is None:
            raise PostwireError(f"no message {message_id} in the queue")
        shown = message_row(spool, message, now_ms)
        delivery = message.delivery
        shown["recipients"] = delivery.recipients
        shown["finished"] = delivery.finished
        shown["deliveries"] = message.state.deliveries
        shown["attempt_history"] = (
            []
            if delivery.is_system
            else email_attempts(spool, delivery.team_id, message_id, now_ms)
        )
        return shown


def describe_message(shown: dict[str, Any]) -> str:
    lines = [
        f"{shown['id']}  {shown['status']}",
        f"  team: {shown['team_id'] or 'system mail'}",
        f"  from: {shown['from']}",
        f"  subject: {shown['subject'] if shown['subject'] is not None else '-'}",
        f"  enqueued: {shown['enqueued_at']} ({format_age(shown['age_seconds'])} ago)",
        f"  next attempt: {shown['next_attempt_at']}",
        f"  pending: {', '.join(shown['pending']) or '-'}",
    ]
    for address, outcome in shown["finished"].items():
        lines.append(f"  {outcome}: {address}")
    for attempt in shown["attempt_history"]:
        lines.append(
            f"  attempt {attempt['number']} ({attempt['status']}) {attempt['started_at'] or '-'}"
        )
        for recipient in attempt["recipients"]:
            diagnostic = recipient["diagnostic"] or ""
            lines.append(f"    {recipient['email']}: {recipient['status']} {diagnostic}".rstrip())
    return "\n".join(lines)


async def change_queue(
    config: Config, selection: Selection, action: str
) -> tuple[list[str], list[str]]:
    """Retry (`action` "retry") or delete every selected message; return the ids changed and
    the reasons of those left as they were."""
    if selection.empty:
        raise PostwireError("choose messages: their ids, --domain DOMAIN or --older-than AGE")
    change = deliver_now if action == "retry" else remove_queued
    changed: list[str] = []
    refused: list[str] = []
    async with opened_spool(config) as spool:
        after: str | None = None
        seen: set[str] = set()
        while True:
            now_ms = spool.clock_ms()
            page = select_page(spool, selection, now_ms, limit=_BULK_PAGE, after=after)
            fresh = [message for message in page if message.id not in seen]
            for message in fresh:
                seen.add(message.id)
                try:
                    await change(spool, message.id, now_ms)
                except QueueChangeRefused as refusal:
                    refused.append(str(refusal))
                else:
                    changed.append(message.id)
            if selection.ids or not fresh or len(page) < _BULK_PAGE:
                break
            after = page[-1].id
        missing = [i for i in selection.ids if i not in seen]
        refused += [f"no message {message_id} in the queue" for message_id in missing]
    return changed, refused
