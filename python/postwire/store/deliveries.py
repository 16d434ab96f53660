"""What delivery keeps beside each spooled message, the events it reports, and the team's
suppression list.

A delivery record is written with its email (same commit) and says who still has to receive
the message; events and suppressions are written in the same commit as the state change that
caused them, so a webhook dispatcher reading `events` never misses one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from postwire import _core
from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    team_id: str
    envelope_from: str
    recipients: list[str]
    tls: str  # the sending domain's policy: "opportunistic" | "enforced"
    # Recipient -> its final status ("delivered", "bounced", "suppressed").
    finished: dict[str, str] = field(default_factory=dict)
    first_attempt_ms: int | None = None
    attempts: int = 0

    @property
    def pending(self) -> list[str]:
        return [r for r in self.recipients if r not in self.finished]


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: str
    type: str  # email.sent, email.delivered, email.delivery_delayed, email.bounced, ...
    created_at_ms: int
    team_id: str
    email_id: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An event not yet handed to the team's webhook endpoints, under its id: ids are
    time-ordered, so the dispatcher takes events across teams in the order they happened."""

    team_id: str


@dataclass(frozen=True, slots=True)
class SuppressionRecord:
    id: str
    email: str  # lower case
    origin: str  # "bounce", "complaint" or "manual"
    created_at_ms: int
    source_id: str | None = None  # the email whose bounce or complaint put it here


DELIVERIES = Table("deliveries", DeliveryRecord)
EVENTS = Table("events", EventRecord)
OUTBOX = Table("outbox", OutboxEntry)
SUPPRESSIONS = Table("suppressions", SuppressionRecord)


def suppression_key(team_id: str, address: str) -> str:
    return f"{team_id}/{address.lower()}"


def is_suppressed(spool: Spool, team_id: str, address: str) -> bool:
    return SUPPRESSIONS.get(spool, suppression_key(team_id, address)) is not None


def add_event(
    batch: WriteBatch, team_id: str, email_id: str, kind: str, now_ms: int, **data: Any
) -> EventRecord:
    """Add an event to `batch`, and to the webhook outbox in the same commit; its id is
    time-ordered, so a team's events scan in order."""
    event = EventRecord(_core.new_id(), kind, now_ms, team_id, email_id, data)
    EVENTS.put(batch, event_key(team_id, event.id), event)
    OUTBOX.put(batch, event.id, OutboxEntry(team_id))
    return event


def event_key(team_id: str, event_id: str) -> str:
    return f"{team_id}/{event_id}"


def email_events(spool: Spool, team_id: str, email_id: str) -> list[EventRecord]:
    """The email's events, oldest first (a scan of the team's events: fine for tests and the
    dashboard's detail page, not for hot paths)."""
    rows = EVENTS.scan(spool, prefix=f"{team_id}/", limit=1_000_000)
    return [event for _, event in rows if event.email_id == email_id]


def new_suppression(
    address: str, origin: str, now_ms: int, source_id: str | None = None
) -> SuppressionRecord:
    return SuppressionRecord(_core.new_id(), address.lower(), origin, now_ms, source_id)


def list_suppressions(spool: Spool, team_id: str) -> list[SuppressionRecord]:
    return [record for _, record in SUPPRESSIONS.scan(spool, prefix=f"{team_id}/", limit=1_000_000)]
