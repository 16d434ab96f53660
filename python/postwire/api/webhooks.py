"""`/webhooks` (contract section 8.1): a team's endpoints, and the messages sent to each.

The rules and writes are `webhooks.endpoints`' (the dashboard calls them too); this module
speaks the contract's JSON.
"""

from __future__ import annotations

import json

from quart import Blueprint, request

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
from postwire.errors import ApiError
from postwire.webhooks import endpoints, messages
from postwire.webhooks.messages import WebhookMessage
from postwire.webhooks.store import WebhookRecord, team_webhooks

DEFAULT_PAGE = 20
# Message states as the Resend SDKs name them (their type: pending, attempting, success,
# failed); the spool says `succeeded`.
WIRE_STATUS = {"pending": "pending", "succeeded": "success", "failed": "failed"}


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

    def allow_private() -> bool:
        return ctx.config.webhooks.allow_private_targets

    @blueprint.post("/webhooks")
    async def create_webhook() -> tuple[CreatedWebhook, int]:
        body = await json_object()
        for name in ("endpoint", "events"):
            if body.get(name) is None:
                raise ApiError(422, "missing_required_field", f"Missing `{name}` field.")
        record = await endpoints.create_webhook(
            ctx.spool,
            current_caller().team_id,
            body["endpoint"],
            body["events"],
            now=ctx.now(),
            allow_private=allow_private(),
        )
        return {"object": "webhook", "id": record.id, "signing_secret": record.signing_secret}, 201

    @blueprint.get("/webhooks")
    async def list_webhooks() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        records = team_webhooks(ctx.spool, current_caller().team_id)[::-1]  # newest first
        window, has_more = page_of(records, page, lambda record: record.id)
        return list_response([dict(webhook_json(record)) for record in window], has_more)

    @blueprint.get("/webhooks/<id:webhook_id>")
    async def get_webhook(webhook_id: str) -> WebhookObject:
        return webhook_json(endpoints.find_webhook(ctx.spool, current_caller().team_id, webhook_id))

    @blueprint.patch("/webhooks/<id:webhook_id>")
    async def update_webhook(webhook_id: str) -> Reference:
        # Unknown keys are ignored: the Python SDK repeats `webhook_id` in the body.
        body = await json_object()
        require_a_change(body, UpdateWebhookBody)
        record = await endpoints.update_webhook(
            ctx.spool,
            current_caller().team_id,
            webhook_id,
            endpoint=body.get("endpoint"),
            events=body.get("events"),
            status=body.get("status"),
            allow_private=allow_private(),
        )
        return {"object": "webhook", "id": record.id}

    @blueprint.delete("/webhooks/<id:webhook_id>")
    async def delete_webhook(webhook_id: str) -> DeletedReference:
        record = await endpoints.delete_webhook(ctx.spool, current_caller().team_id, webhook_id)
        return {"object": "webhook", "id": record.id, "deleted": True}

    @blueprint.post("/webhooks/<id:webhook_id>/signing-secret/rotate")
    async def rotate_signing_secret(webhook_id: str) -> CreatedWebhook:
        await json_body()  # tolerated and ignored
        team_id = current_caller().team_id
        record = await endpoints.rotate_signing_secret(ctx.spool, team_id, webhook_id)
        return {"object": "webhook", "id": record.id, "signing_secret": record.signing_secret}

    @blueprint.get("/webhooks/<id:webhook_id>/events")
    async def list_events(webhook_id: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        webhook = endpoints.find_webhook(ctx.spool, current_caller().team_id, webhook_id)
        found = messages.webhook_messages(ctx.spool, webhook.team_id, webhook.id)
        window, has_more = page_of(found, page, lambda message: message.event_id)
        return list_response([dict(event_summary(message)) for message in window], has_more)

    @blueprint.get("/webhooks/<id:webhook_id>/events/<event_id:event_id>")
    async def get_event(webhook_id: str, event_id: str) -> WebhookEventObject:
        team_id = current_caller().team_id
        return event_json(endpoints.find_message(ctx.spool, team_id, webhook_id, event_id))

    @blueprint.post("/webhooks/<id:webhook_id>/events/<event_id:event_id>/replay")
    async def replay_event(webhook_id: str, event_id: str) -> ReplayedWebhookEvent:
        await json_body()  # tolerated and ignored
        message = await endpoints.replay_message(
            ctx.spool, current_caller().team_id, webhook_id, event_id, now_ms=ctx.now_ms()
        )
        if ctx.webhooks is not None:
            ctx.webhooks.wake()
        return {"object": "webhook_event", "id": message.event_id, "status": "pending"}

    return blueprint
