"""`/webhooks` (contract section 8.1): a team's endpoints, and the messages sent to each.

Endpoints are created, listed, changed and deleted here; the dispatcher owns what happens to
their messages, except that a message can be replayed (made due again) from here. Both write
an endpoint's record and its messages, so each read-modify-commit holds `Spool.record_lock` on
the endpoint's key.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import replace
from typing import Any

from quart import Blueprint, request

from postwire import _core
from postwire._core import WriteBatch
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import (
    CreatedWebhook,
    DeletedReference,
    ListBody,
    Reference,
    ReplayedWebhookEvent,
    UpdateWebhookBody,
    WebhookAttemptObject,
    WebhookEventObject,
    WebhookEventSummary,
    WebhookObject,
)
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.api.request_body import json_body, json_object, require_a_change
from postwire.domains.store import format_timestamp
from postwire.errors import ApiError, validation_error
from postwire.outbound_http import IPAddress, is_refused_address, parse_http_url
from postwire.store.accounts import contract_timestamp
from postwire.webhooks import messages
from postwire.webhooks.messages import WEBHOOK_DUE, WEBHOOK_MESSAGES, WebhookMessage
from postwire.webhooks.signing import new_signing_secret
from postwire.webhooks.store import (
    EVENT_KINDS,
    WEBHOOKS,
    WebhookRecord,
    team_webhooks,
    webhook_key,
)

# No contract limit; a bound keeps records small, and real endpoint URLs are far shorter.
MAX_ENDPOINT_LENGTH = 2048
STATUSES = ("enabled", "disabled")
DEFAULT_PAGE = 20
# Message states as the Resend SDKs name them (their type: pending, attempting, success,
# failed); the spool says `succeeded`.
WIRE_STATUS = {"pending": "pending", "succeeded": "success", "failed": "failed"}
# A receiver sees `svix-id: msg_<event id>`, and Resend's own event ids look like that, so
# either form names the event in a path.
MESSAGE_ID_PREFIX = "msg_"


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


def webhook_json(record: WebhookRecord) -> WebhookObject:
    body: WebhookObject = {
        "object": "webhook",
        "id": record.id,
        "endpoint": record.endpoint,
        "events": record.events,
        "status": record.status,
        "created_at": record.created_at,
        "signing_secret": record.signing_secret,
    }
    if record.disabled_reason is not None:
        body["disabled_reason"] = record.disabled_reason
    return body


def event_summary(message: WebhookMessage) -> WebhookEventSummary:
    next_attempt = message.next_attempt_ms
    return {
        "object": "webhook_event",
        "id": message.event_id,
        "type": message.event_type,
        "status": WIRE_STATUS.get(message.status, message.status),
        "created_at": format_timestamp(message.created_at_ms),
        "attempts": len(message.attempts),
        "next_attempt_at": None if next_attempt is None else format_timestamp(next_attempt),
    }


def event_json(message: WebhookMessage) -> WebhookEventObject:
    attempts: list[WebhookAttemptObject] = [
        {
            "attempted_at": format_timestamp(attempt["at_ms"]),
            "status_code": attempt.get("status_code"),
            "error": attempt.get("error"),
            "duration_ms": attempt["duration_ms"],
        }
        for attempt in message.attempts
    ]
    summary = event_summary(message)
    return {
        "object": "webhook_event",
        "id": summary["id"],
        "type": summary["type"],
        "status": summary["status"],
        "created_at": summary["created_at"],
        "attempts": attempts,
        "next_attempt_at": summary["next_attempt_at"],
        "payload": json.loads(message.payload),
    }


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("webhooks", __name__)

    def find_webhook(webhook_id: str) -> WebhookRecord:
        record = WEBHOOKS.get(ctx.spool, webhook_key(current_caller().team_id, webhook_id))
        if record is None:
            raise ApiError(404, "not_found", "Webhook not found")
        return record

    def team_message_key(webhook_id: str, event_id: str) -> str:
        webhook = find_webhook(webhook_id)
        return messages.message_key(
            webhook.team_id, webhook.id, event_id.removeprefix(MESSAGE_ID_PREFIX)
        )

    def find_message(key: str) -> WebhookMessage:
        message = WEBHOOK_MESSAGES.get(ctx.spool, key)
        if message is None:
            raise ApiError(404, "not_found", "Webhook event not found")
        return message

    @blueprint.post("/webhooks")
    async def create_webhook() -> tuple[CreatedWebhook, int]:
        body = await json_object()
        for name in ("endpoint", "events"):
            if body.get(name) is None:
                raise ApiError(422, "missing_required_field", f"Missing `{name}` field.")
        allow_private = ctx.config.webhooks.allow_private_targets
        record = WebhookRecord(
            id=_core.new_id(),
            team_id=current_caller().team_id,
            endpoint=endpoint_url(body["endpoint"], allow_private=allow_private),
            events=event_kinds(body["events"]),
            status="enabled",
            created_at=contract_timestamp(ctx.now()),
            signing_secret=new_signing_secret(),
        )
        batch = WriteBatch()
        WEBHOOKS.insert(batch, webhook_key(record.team_id, record.id), record)
        await ctx.spool.commit(batch)
        return {"object": "webhook", "id": record.id, "signing_secret": record.signing_secret}, 201

    @blueprint.get("/webhooks")
    async def list_webhooks() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        records = team_webhooks(ctx.spool, current_caller().team_id)[::-1]  # newest first
        window, has_more = page_of(records, page, lambda record: record.id)
        return list_response([dict(webhook_json(record)) for record in window], has_more)

    @blueprint.get("/webhooks/<id:webhook_id>")
    async def get_webhook(webhook_id: str) -> WebhookObject:
        return webhook_json(find_webhook(webhook_id))

    @blueprint.patch("/webhooks/<id:webhook_id>")
    async def update_webhook(webhook_id: str) -> Reference:
        # Unknown keys are ignored: the Python SDK repeats `webhook_id` in the body.
        body = await json_object()
        require_a_change(body, UpdateWebhookBody)
        changes: dict[str, Any] = {}
        if body.get("endpoint") is not None:
            allow_private = ctx.config.webhooks.allow_private_targets
            changes["endpoint"] = endpoint_url(body["endpoint"], allow_private=allow_private)
            # Failures of the old URL say nothing about the new one.
            changes["failing_since_ms"] = None
        if body.get("events") is not None:
            changes["events"] = event_kinds(body["events"])
        status = body.get("status")
        if status is not None:
            if status not in STATUSES:
                raise validation_error("The `status` field must be `enabled` or `disabled`.")
            changes["status"] = status
            if status == "enabled":
                # A fresh start: the dispatcher's reason and failure streak no longer apply.
                changes.update(disabled_reason=None, failing_since_ms=None)
        key = webhook_key(current_caller().team_id, webhook_id)
        async with ctx.spool.record_lock(key):
            record = replace(find_webhook(webhook_id), **changes)
            batch = WriteBatch()
            WEBHOOKS.put(batch, key, record)
            await ctx.spool.commit(batch)
        return {"object": "webhook", "id": record.id}

    @blueprint.delete("/webhooks/<id:webhook_id>")
    async def delete_webhook(webhook_id: str) -> DeletedReference:
        key = webhook_key(current_caller().team_id, webhook_id)
        async with ctx.spool.record_lock(key):
            record = find_webhook(webhook_id)
            batch = WriteBatch()
            WEBHOOKS.delete(batch, key)
            # Its messages go in the same commit, so nothing is left due for a missing endpoint.
            for message in messages.webhook_messages(ctx.spool, record.team_id, record.id):
                if message.next_attempt_ms is not None:
                    entry = messages.DueEntry(message.team_id, message.webhook_id, message.event_id)
                    WEBHOOK_DUE.delete(batch, messages.due_key(message.next_attempt_ms, entry))
                WEBHOOK_MESSAGES.delete(
                    batch, messages.message_key(record.team_id, record.id, message.event_id)
                )
            await ctx.spool.commit(batch)
        return {"object": "webhook", "id": record.id, "deleted": True}

    @blueprint.post("/webhooks/<id:webhook_id>/signing-secret/rotate")
    async def rotate_signing_secret(webhook_id: str) -> CreatedWebhook:
        await json_body()  # tolerated and ignored
        key = webhook_key(current_caller().team_id, webhook_id)
        async with ctx.spool.record_lock(key):
            # The old secret stops at once: every attempt is signed with the current one.
            record = replace(find_webhook(webhook_id), signing_secret=new_signing_secret())
            batch = WriteBatch()
            WEBHOOKS.put(batch, key, record)
            await ctx.spool.commit(batch)
        return {"object": "webhook", "id": record.id, "signing_secret": record.signing_secret}

    @blueprint.get("/webhooks/<id:webhook_id>/events")
    async def list_events(webhook_id: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        webhook = find_webhook(webhook_id)
        found = messages.webhook_messages(ctx.spool, webhook.team_id, webhook.id)
        window, has_more = page_of(found, page, lambda message: message.event_id)
        return list_response([dict(event_summary(message)) for message in window], has_more)

    @blueprint.get("/webhooks/<id:webhook_id>/events/<event_id:event_id>")
    async def get_event(webhook_id: str, event_id: str) -> WebhookEventObject:
        return event_json(find_message(team_message_key(webhook_id, event_id)))

    @blueprint.post("/webhooks/<id:webhook_id>/events/<event_id:event_id>/replay")
    async def replay_event(webhook_id: str, event_id: str) -> ReplayedWebhookEvent:
        await json_body()  # tolerated and ignored
        key = team_message_key(webhook_id, event_id)
        # The endpoint's lock, which the dispatcher holds while it records an attempt.
        async with ctx.spool.record_lock(webhook_key(current_caller().team_id, webhook_id)):
            message = messages.replayed(find_message(key), ctx.now_ms())
            batch = WriteBatch()
            messages.put_message(batch, ctx.spool, message)
            await ctx.spool.commit(batch)
        if ctx.webhooks is not None:
            ctx.webhooks.wake()
        return {"object": "webhook_event", "id": message.event_id, "status": "pending"}

    return blueprint
