"""The JSON body of each webhook POST (contract section 8.2): the event's envelope and the data
of the email it is about, or, for the other kinds (`contact.*`), the data the event recorded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from postwire.store.accounts import iso_from_contract_timestamp
from postwire.store.deliveries import EventRecord
from postwire.store.emails import EmailRecord

# Data an event carries that goes into the payload as it is, by event type.
_EXTRA_KEY = {"email.bounced": "bounce", "email.clicked": "click"}


def iso_from_ms(at_ms: int) -> str:
    """`2026-11-23T10:00:00.000Z`, the contract's webhook timestamps."""
    moment = datetime.fromtimestamp(at_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def is_email_event(kind: str) -> bool:
    """Whether events of `kind` are about an email (their `email_id` names it)."""
    return kind.startswith("email.")


def webhook_payload(event: EventRecord, email: EmailRecord | None) -> bytes:
    """The body POSTed for `event`; `email` is None when it is gone (its id still says which).
    Events of other kinds than `email.*` recorded their whole payload data when they happened
    (a contact as it was then)."""
    if not is_email_event(event.type):
        created_at = iso_from_ms(event.created_at_ms)
        return orjson.dumps({"type": event.type, "created_at": created_at, "data": event.data})
    data: dict[str, Any] = {"email_id": event.email_id}
    concerned = event.data.get("to")
    if email is not None:
        data |= {
            "created_at": iso_from_contract_timestamp(email.created_at),
            "from": email.sender,
            "to": [concerned] if isinstance(concerned, str) else list(email.to),
            "subject": email.subject,
            "message_id": email.message_id,
            "tags": {tag["name"]: tag["value"] for tag in email.tags},
        }
        if email.broadcast_id is not None:
            data["broadcast_id"] = email.broadcast_id
        if email.template_id is not None:
            data["template_id"] = email.template_id
        if email.headers:  # only when the sender set some (contract 8.2)
            data["headers"] = [dict(header) for header in email.headers]
    elif isinstance(concerned, str):
        data["to"] = [concerned]
    extra = _EXTRA_KEY.get(event.type)
    if extra is not None and extra in event.data:
        data[extra] = event.data[extra]
    envelope = {"type": event.type, "created_at": iso_from_ms(event.created_at_ms), "data": data}
    return orjson.dumps(envelope)
