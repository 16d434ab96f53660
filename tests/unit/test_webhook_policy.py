"""Table tests of the webhook retry policy and payloads (no sockets)."""

from __future__ import annotations

import json

import pytest

from postwire.store.deliveries import EventRecord
from postwire.store.emails import EmailRecord
from postwire.webhooks.payloads import iso_from_ms, webhook_payload
from postwire.webhooks.retry_policy import (
    DISABLE_AFTER_MS,
    HOUR_MS,
    SECOND_MS,
    next_attempt_ms,
    should_disable,
)

NOW = 1_800_000_000_000


@pytest.mark.parametrize(
    ("failed", "wait_ms"),
    [
        (0, None),
        (1, 5 * SECOND_MS),
        (2, 300 * SECOND_MS),
        (3, 1800 * SECOND_MS),
        (4, 2 * HOUR_MS),
        (5, 5 * HOUR_MS),
        (6, 10 * HOUR_MS),
        (7, 10 * HOUR_MS),
        (8, None),  # the first try and seven retries: failed
    ],
)
def test_next_attempt(failed: int, wait_ms: int | None) -> None:
    expected = None if wait_ms is None else NOW + wait_ms
    assert next_attempt_ms(failed, NOW) == expected


@pytest.mark.parametrize(
    ("failing_since", "disabled"),
    [
        (None, False),
        (NOW, False),
        (NOW - DISABLE_AFTER_MS + 1, False),
        (NOW - DISABLE_AFTER_MS, True),
    ],
)
def test_should_disable(failing_since: int | None, disabled: bool) -> None:
    assert should_disable(failing_since, NOW) is disabled


EMAIL = EmailRecord(
    id="e1",
    team_id="t",
    domain_id="d",
    sender="Acme <a@acme.test>",
    to=["ann@example.org", "bob@example.org"],
    subject="Hi",
    message_id="<e1@acme.test>",
    created_at="2026-11-23 10:00:00.000000+00",
    last_event="bounced",
    envelope_from="bounces+e1@send.acme.test",
    recipients=["ann@example.org", "bob@example.org"],
)


def test_bounced_payload_names_the_recipient_and_carries_the_bounce() -> None:
    bounce = {"message": "No such user", "type": "Permanent", "subType": "NoEmail",
              "diagnosticCode": ["smtp; 550 5.1.1 no such user"]}  # fmt: skip
    event = EventRecord(
        "v1", "email.bounced", NOW, "t", "e1", {"to": "bob@example.org", "bounce": bounce}
    )
    payload = json.loads(webhook_payload(event, EMAIL))
    assert payload == {
        "type": "email.bounced",
        "created_at": iso_from_ms(NOW),
        "data": {
            "email_id": "e1",
            "created_at": "2026-11-23T10:00:00.000Z",
            "from": "Acme <a@acme.test>",
            "to": ["bob@example.org"],
            "subject": "Hi",
            "message_id": "<e1@acme.test>",
            "tags": {},
            "bounce": bounce,
        },
    }


def test_an_event_without_a_recipient_concerns_all_and_a_gone_email_still_names_itself() -> None:
    click = {
        "ipAddress": "192.0.2.1",
        "link": "https://acme.test/",
        "timestamp": "x",
        "userAgent": "UA",
    }
    event = EventRecord("v2", "email.clicked", NOW, "t", "e1", {"click": click})
    data = json.loads(webhook_payload(event, EMAIL))["data"]
    assert data["to"] == ["ann@example.org", "bob@example.org"] and data["click"] == click
    assert json.loads(webhook_payload(event, None))["data"] == {"email_id": "e1", "click": click}


def test_timestamps() -> None:
    assert iso_from_ms(1_795_433_445_007) == "2026-11-23T11:30:45.007Z"
