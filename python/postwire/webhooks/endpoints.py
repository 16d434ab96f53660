"""A team's webhook endpoints as its people change them: create, change, delete, rotate the
signing secret, replay a message. The REST API and the dashboard both call these.

The dispatcher owns what happens to messages, except that one can be made due again here. Both
write an endpoint's record and its messages, so each read-modify-commit holds
`Spool.guarded` on the endpoint's key. Refusals are `ApiError`s (422 `validation_error`,
404 `not_found`) whose messages name the contract's fields.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import ApiError, validation_error
from postwire.outbound_http import IPAddress, is_refused_address, parse_http_url
from postwire.store.accounts import contract_timestamp
from postwire.store.spool import Spool
from postwire.webhooks import messages
from postwire.webhooks.messages import WEBHOOK_DUE, WEBHOOK_MESSAGES, WebhookMessage
from postwire.webhooks.signing import new_signing_secret
from postwire.webhooks.store import EVENT_KINDS, WEBHOOKS, WebhookRecord, webhook_key

# No contract limit; a bound keeps records small, and real endpoint URLs are far shorter.
MAX_ENDPOINT_LENGTH: Final = 2048
STATUSES: Final = ("enabled", "disabled")
# A receiver sees `svix-id: msg_<event id>`, and Resend's own event ids look like that, so
# either form names the event.
MESSAGE_ID_PREFIX: Final = "msg_"


def endpoint_url(value: object, *, allow_private: bool) -> str:
    """`value` when it is an absolute http(s) URL without credentials whose host is not a
    literal inward address (unless `allow_private`); 422 `validation_error` otherwise."""
    if not isinstance(value, str):
        raise validation_error("The `endpoint` field must be a string.")
    if len(value) > MAX_ENDPOINT_LENGTH:
        raise validation_error(
            f"The `endpoint` field must be at most {MAX_ENDPOINT_LENGTH} characters."
        )
    url = None if any(c.isspace() or not c.isprintable() for c in value) else parse_http_url(value)
    # httpx takes any number as a port; a POST could never reach one outside 1-65535.
    if url is None or (url.port is not None and not 0 < url.port < 65536):
        raise validation_error("The `endpoint` field must be an absolute http or https URL.")
    if url.userinfo:
        raise validation_error("The `endpoint` URL must not contain credentials.")
    host = url.raw_host.decode("ascii")
    if not allow_private and is_inward_host(host):
        raise validation_error(
            f"The `endpoint` host `{host}` is a private, loopback or reserved address."
        )
    return value


def is_inward_host(host: str) -> bool:
    """Whether `host`, as written, names this machine or a network the SSRF guard refuses.
    Names are resolved only at send time, where the dispatcher vets the addresses."""
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: always loopback
        return True
    address = literal_address(host)
    return address is not None and is_refused_address(address)


def literal_address(host: str) -> IPAddress | None:
    try:
        # A zone (`fe80::1%eth0`) is dropped: the address decides.
        return ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        pass
    try:
        # The legacy IPv4 spellings (`2130706433`, `0x7f.1`, `127.1`), which getaddrinfo reads
        # as addresses too.
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def event_kinds(value: object) -> list[str]:
    """A non-empty list of `EVENT_KINDS`, duplicates collapsed, in the order given."""
    if not isinstance(value, list) or not value:
        raise validation_error("The `events` field must be a non-empty array of event types.")
    if not all(isinstance(kind, str) for kind in value):
        raise validation_error("The `events` field must only hold strings.")
    kinds = list(dict.fromkeys(value))
    unknown = [kind for kind in kinds if kind not in EVENT_KINDS]
    if unknown:
        raise validation_error(
            f"Unknown event types: {', '.join(f'`{kind}`' for kind in unknown)}. "
            f"Supported: {', '.join(EVENT_KINDS)}."
        )
    return kinds


def find_webhook(spool: Spool, team_id: str, webhook_id: str) -> WebhookRecord:
    """The team's endpoint; 404 `not_found` for an unknown id or another team's."""
    return _webhook_found(WEBHOOKS.get(spool, webhook_key(team_id, webhook_id)))


async def find_webhook_parked(spool: Spool, team_id: str, webhook_id: str) -> WebhookRecord:
    """`find_webhook`, parked rather than blocking on a table store on the network."""
    return _webhook_found(await WEBHOOKS.aget(spool, webhook_key(team_id, webhook_id)))


def _webhook_found(record: WebhookRecord | None) -> WebhookRecord:
    if record is None:
        raise ApiError(404, "not_found", "Webhook not found")
    return record


def find_message(spool: Spool, team_id: str, webhook_id: str, event_id: str) -> WebhookMessage:
    """The endpoint's message for an event (its id with or without `msg_`); 404 if none."""
    webhook = find_webhook(spool, team_id, webhook_id)
    return _message_found(WEBHOOK_MESSAGES.get(spool, _message_key(webhook, event_id)))


async def find_message_parked(
    spool: Spool, team_id: str, webhook_id: str, event_id: str
) -> WebhookMessage:
    """`find_message`, parked rather than blocking on a table store on the network."""
    webhook = await find_webhook_parked(spool, team_id, webhook_id)
    return _message_found(await WEBHOOK_MESSAGES.aget(spool, _message_key(webhook, event_id)))


def _message_key(webhook: WebhookRecord, event_id: str) -> str:
    return messages.message_key(
        webhook.team_id, webhook.id, event_id.removeprefix(MESSAGE_ID_PREFIX)
    )


def _message_found(message: WebhookMessage | None) -> WebhookMessage:
    if message is None:
        raise ApiError(404, "not_found", "Webhook event not found")
    return message


async def create_webhook(
    spool: Spool,
    team_id: str,
    endpoint: object,
    events: object,
    *,
    now: datetime,
    allow_private: bool,
) -> WebhookRecord:
    """A new enabled endpoint with a fresh signing secret, validated and stored."""
    record = WebhookRecord(
        id=_core.new_id(),
        team_id=team_id,
        endpoint=endpoint_url(endpoint, allow_private=allow_private),
        events=event_kinds(events),
        status="enabled",
        created_at=contract_timestamp(now),
        signing_secret=new_signing_secret(),
    )
    batch = WriteBatch()
    WEBHOOKS.insert(batch, webhook_key(record.team_id, record.id), record)
    await spool.commit(batch)
    return record


async def update_webhook(
    spool: Spool,
    team_id: str,
    webhook_id: str,
    *,
    endpoint: object = None,
    events: object = None,
    status: object = None,
    allow_private: bool,
) -> WebhookRecord:
    """Change what is given (None: leave it); return the endpoint as stored."""
    changes: dict[str, Any] = {}
    if endpoint is not None:
        changes["endpoint"] = endpoint_url(endpoint, allow_private=allow_private)
        # Failures of the old URL say nothing about the new one.
        changes["failing_since_ms"] = None
    if events is not None:
        changes["events"] = event_kinds(events)
    if status is not None:
        if status not in STATUSES:
            raise validation_error("The `status` field must be `enabled` or `disabled`.")
        changes["status"] = status
        if status == "enabled":
            # A fresh start: the dispatcher's reason and failure streak no longer apply.
            changes.update(disabled_reason=None, failing_since_ms=None)
    key = webhook_key(team_id, webhook_id)
    async for attempt in spool.guarded(key):
        with attempt:
            record = replace(find_webhook(spool, team_id, webhook_id), **changes)
            batch = WriteBatch()
            WEBHOOKS.put(batch, key, record)
            await spool.commit(batch)
    return record


async def delete_webhook(spool: Spool, team_id: str, webhook_id: str) -> WebhookRecord:
    """Remove the endpoint and its messages; return what was removed."""
    key = webhook_key(team_id, webhook_id)
    async for attempt in spool.guarded(key):
        with attempt:
            record = find_webhook(spool, team_id, webhook_id)
            batch = WriteBatch()
            WEBHOOKS.delete(batch, key)
            # Its messages go in the same commit, so nothing is left due for a missing endpoint.
            for message in messages.webhook_messages(spool, record.team_id, record.id):
                if message.next_attempt_ms is not None:
                    entry = messages.DueEntry(message.team_id, message.webhook_id, message.event_id)
                    WEBHOOK_DUE.delete(batch, messages.due_key(message.next_attempt_ms, entry))
                WEBHOOK_MESSAGES.delete(
                    batch, messages.message_key(record.team_id, record.id, message.event_id)
                )
            await spool.commit(batch)
    return record


async def rotate_signing_secret(spool: Spool, team_id: str, webhook_id: str) -> WebhookRecord:
    """A new signing secret; the old one stops at once (every attempt is signed with the
    current one)."""
    key = webhook_key(team_id, webhook_id)
    async for attempt in spool.guarded(key):
        with attempt:
            record = replace(
                find_webhook(spool, team_id, webhook_id), signing_secret=new_signing_secret()
            )
            batch = WriteBatch()
            WEBHOOKS.put(batch, key, record)
            await spool.commit(batch)
    return record


async def replay_message(
    spool: Spool, team_id: str, webhook_id: str, event_id: str, *, now_ms: int
) -> WebhookMessage:
    """Make the event's message due now, whatever became of it; its attempts are kept. The
    caller wakes the dispatcher."""
    find_message(spool, team_id, webhook_id, event_id)  # 404 before taking the lock
    # The endpoint's lock, which the dispatcher holds while it records an attempt.
    async for attempt in spool.guarded(webhook_key(team_id, webhook_id)):
        with attempt:
            message = messages.replayed(find_message(spool, team_id, webhook_id, event_id), now_ms)
            batch = WriteBatch()
            messages.put_message(batch, spool, message)
            await spool.commit(batch)
    return message
