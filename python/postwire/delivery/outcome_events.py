"""The events, suppressions and statuses a delivery attempt's outcomes add to its commit."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from postwire import _core
from postwire.delivery.bounces import Outcome, should_suppress
from postwire.store.deliveries import (
    SUPPRESSIONS,
    DeliveryRecord,
    add_event,
    new_suppression,
    suppression_key,
)

log = logging.getLogger("postwire.delivery")


def add_outcomes(
    batch: _core.WriteBatch,
    message_id: str,
    delivery: DeliveryRecord,
    outcomes: dict[str, Outcome],
    retry_at: datetime | None,
    now_ms: int,
) -> tuple[DeliveryRecord, str | None]:
    """Add the events and suppressions of `outcomes` to `batch`. Returns `delivery` with
    their statuses, and the email's new `last_event` (None: unchanged). A transient outcome
    is a bounce when `retry_at` is None (no retry left). System mail only has its statuses
    recorded and logged for the operator: it is no team's, so no team's events, webhooks,
    counts or suppressions move (a bounce of a password reset is no reason for the team whose
    domain signed it to stop mailing that address)."""
    if delivery.is_system:
        return _system_outcomes(message_id, delivery, outcomes, retry_at), None
    team, broadcast, domain = delivery.team_id, delivery.broadcast_id, delivery.domain_id
    tags = tuple(delivery.tags)  # the metrics' counted tags
    finished = dict(delivery.finished)
    last_event: str | None = None
    if delivery.first_attempt_ms is None and outcomes:
        add_event(
            batch, team, message_id, "email.sent", now_ms,
            broadcast_id=broadcast, domain_id=domain, counted_tags=tags,
        )  # fmt: skip
        last_event = "sent"
        delivery = replace(delivery, first_attempt_ms=now_ms)
    for address, outcome in outcomes.items():
        if outcome.status == "delivered":
            finished[address] = "delivered"
            add_event(
                batch, team, message_id, "email.delivered", now_ms,
                broadcast_id=broadcast, domain_id=domain, counted_tags=tags, to=address,
            )  # fmt: skip
            last_event = "delivered"
        elif outcome.status == "permanent" or retry_at is None:
            finished[address] = "bounced"
            add_event(
                batch, team, message_id, "email.bounced", now_ms,
                broadcast_id=broadcast, domain_id=domain, counted_tags=tags, to=address,
                bounce=outcome.bounce(),
            )  # fmt: skip
            last_event = "bounced"
            if should_suppress(outcome):
                SUPPRESSIONS.put(
                    batch,
                    suppression_key(team, address),
                    new_suppression(address, "bounce", now_ms, message_id),
                )
        else:
            add_event(
                batch, team, message_id, "email.delivery_delayed", now_ms,
                broadcast_id=broadcast, domain_id=domain, counted_tags=tags, to=address,
                diagnostic=outcome.diagnostic,
            )  # fmt: skip
            last_event = "delivery_delayed"
    return replace(delivery, finished=finished), last_event


def _system_outcomes(
    message_id: str,
    delivery: DeliveryRecord,
    outcomes: dict[str, Outcome],
    retry_at: datetime | None,
) -> DeliveryRecord:
    """`delivery` with the statuses of `outcomes`, each logged (never the message: it holds
    the recipient's secret link)."""
    finished = dict(delivery.finished)
    for address, outcome in outcomes.items():
        if outcome.status == "delivered":
            finished[address] = "delivered"
            log.info("system mail %s delivered to %s", message_id, address)
        elif outcome.status == "permanent" or retry_at is None:
            finished[address] = "bounced"
            log.warning("system mail %s to %s bounced: %s", message_id, address, outcome.diagnostic)
        else:
            log.info("system mail %s to %s delayed: %s", message_id, address, outcome.diagnostic)
    return replace(delivery, finished=finished)
