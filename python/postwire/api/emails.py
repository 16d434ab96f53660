"""`/emails` (contract section 3): send, batch, get, list, reschedule, cancel."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import trio
from quart import Blueprint, request

from postwire.accept import IdempotentRequest, PreparedEmail
from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import EmailObject, ListBody, Reference
from postwire.api.pagination import list_response, parse_page_request
from postwire.api.request_body import json_body, json_object
from postwire.api.scheduling import parse_scheduled_at
from postwire.api.send_request import (
    parse_batch_request,
    parse_batch_validation_header,
    parse_send_request,
    resolve_attachments,
)
from postwire.compose.request import SendRequest
from postwire.errors import ApiError, validation_error
from postwire.insights.reading import insights_json, read_email_insights_parked
from postwire.store import emails as email_store
from postwire.store.accounts import contract_timestamp
from postwire.store.deliveries import email_attempts_parked
from postwire.store.emails import EmailRecord
from postwire.store.idempotency import IdempotencyScope, body_fingerprint, validate_key
from postwire.templates.published import published_templates

ParsedT = TypeVar("ParsedT")

# Bodies above this are parsed off the Trio thread (html-to-text is slow on big pages).
_PARSE_IN_THREAD_BYTES = 256 * 1024


def email_json(record: EmailRecord, *, full: bool) -> EmailObject:
    """The contract's Email object (section 3.5); list items leave out html, text and tags."""
    body: EmailObject = {
        "object": "email",
        "id": record.id,
        "to": record.to,
        "from": record.sender,
        "created_at": record.created_at,
        "subject": record.subject,
        "bcc": record.bcc,
        "cc": record.cc,
        "reply_to": record.reply_to,
        "last_event": record.last_event,
        "scheduled_at": record.scheduled_at,
        "message_id": record.message_id,
    }
    if full:
        body["html"] = record.html
        body["text"] = record.text
        body["tags"] = record.tags
    return body


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("emails", __name__)

    async def parse_in_place_or_thread(
        parse: Callable[[Any], ParsedT], body: Any, raw_size: int
    ) -> ParsedT:
        if raw_size > _PARSE_IN_THREAD_BYTES:
            return await trio.to_thread.run_sync(parse, body)
        return parse(body)

    async def complete(send: SendRequest) -> SendRequest:
        if not send.has_remote_attachments:
            return send
        return await resolve_attachments(
            send, allow_private=ctx.config.webhooks.allow_private_targets
        )

    async def accept(
        endpoint: str,
        body: Any,
        prepare: Callable[[datetime], Awaitable[tuple[list[PreparedEmail], dict[str, Any]]]],
    ) -> dict[str, Any]:
        """Accept under the request's `Idempotency-Key`, if any, and wake delivery."""
        key = validate_key(request.headers.get("Idempotency-Key"))
        idempotent = None
        if key is not None:
            scope = IdempotencyScope(current_caller().team_id, endpoint, key)
            idempotent = IdempotentRequest(scope, body_fingerprint(body))
        now = ctx.now()
        response = await ctx.acceptor.accept(
            lambda: prepare(now), idempotent=idempotent, status=200, now=now
        )
        if ctx.delivery is not None:
            ctx.delivery.wake()
        return response

    @blueprint.post("/emails")
    async def send_email() -> dict[str, Any]:
        raw_size = request.content_length or 0
        body = await json_body()
        caller = current_caller()
        templates = published_templates(ctx.spool, caller.team_id)

        async def prepare(now: datetime) -> tuple[list[PreparedEmail], dict[str, Any]]:
            send = await parse_in_place_or_thread(
                lambda b: parse_send_request(b, now=now, templates=templates), body, raw_size
            )
            send = await complete(send)
            prepared = await ctx.acceptor.prepare(caller.team_id, caller.key, send, now)
            return [prepared], {"id": prepared.record.id}

        return await accept("POST /emails", body, prepare)

    @blueprint.post("/emails/batch")
    async def send_batch() -> dict[str, Any]:
        raw_size = request.content_length or 0
        mode = parse_batch_validation_header(request.headers.get("x-batch-validation"))
        body = await json_body()
        caller = current_caller()
        templates = published_templates(ctx.spool, caller.team_id)

        async def prepare(now: datetime) -> tuple[list[PreparedEmail], dict[str, Any]]:
            batch = await parse_in_place_or_thread(
                lambda b: parse_batch_request(b, now=now, mode=mode, templates=templates),
                body,
                raw_size,
            )
            errors: list[dict[str, Any]] = [
                {"index": index, "message": error.message} for index, error in batch.errors
            ]
            indexes = [index for index, _ in batch.valid]
            outcomes = await ctx.acceptor.prepare_many(
                caller.team_id, caller.key, [send for _, send in batch.valid], now
            )
            prepared: list[PreparedEmail] = []
            for index, outcome in zip(indexes, outcomes, strict=True):
                if isinstance(outcome, PreparedEmail):
                    prepared.append(outcome)
                elif mode == "strict":
                    raise ApiError(
                        outcome.status, outcome.name, f"Email at index {index}: {outcome.message}"
                    )
                else:
                    errors.append({"index": index, "message": outcome.message})
            response: dict[str, Any] = {"data": [{"id": p.record.id} for p in prepared]}
            if mode == "permissive":
                response["errors"] = sorted(errors, key=lambda e: e["index"])
            return prepared, response

        return await accept("POST /emails/batch", body, prepare)

    @blueprint.get("/emails")
    async def list_emails() -> ListBody:
        page = parse_page_request(request.args, default_limit=20)
        records, has_more = await email_store.list_emails_parked(
            ctx.spool,
            current_caller().team_id,
            limit=page.limit or 20,
            after=page.after,
            before=page.before,
        )
        data = [dict(email_json(record, full=False)) for record in records]
        return list_response(data, has_more)

    @blueprint.get("/emails/<id:email_id>")
    async def get_email(email_id: str) -> EmailObject:
        record = await email_store.get_email_parked(ctx.spool, current_caller().team_id, email_id)
        body = email_json(record, full=True)
        body["attempts"] = await email_attempts_parked(
            ctx.spool, record.team_id, record.id, ctx.now_ms()
        )
        found = await read_email_insights_parked(ctx.spool, record.team_id, record.id)
        if found is not None:
            body["insights"] = insights_json(found.insights)
        return body

    @blueprint.patch("/emails/<id:email_id>")
    async def reschedule_email(email_id: str) -> Reference:
        body = await json_object()
        record = await email_store.get_email_parked(ctx.spool, current_caller().team_id, email_id)
        value = body.get("scheduled_at")
        if not isinstance(value, str):
            raise ApiError(422, "missing_required_field", "Missing `scheduled_at` field.")
        now = ctx.now()
        try:
            when = parse_scheduled_at(value, now)
        except ApiError:
            raise
        except ValueError as exc:
            raise validation_error(str(exc)) from None
        await email_store.reschedule_email(
            ctx.spool, record, contract_timestamp(when), int(when.timestamp() * 1000), ctx.now_ms()
        )
        return {"object": "email", "id": record.id}

    @blueprint.post("/emails/<id:email_id>/cancel")
    async def cancel_email(email_id: str) -> Reference:
        await json_body()  # tolerated and ignored
        record = await email_store.get_email_parked(ctx.spool, current_caller().team_id, email_id)
        await email_store.cancel_email(ctx.spool, record, ctx.now_ms())
        return {"object": "email", "id": record.id}

    return blueprint
