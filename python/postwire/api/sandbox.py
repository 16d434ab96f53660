"""`/sandbox/messages`: the inbox of `postwire serve --sandbox` (docs/api.md#sandbox).

Each team reads only the messages it sent. The inbox stays readable after the sandbox is
switched off: it is what an earlier sandbox run held, and nothing is added to it.
"""

from __future__ import annotations

from quart import Blueprint, request

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import ListBody, SandboxMessageObject
from postwire.api.pagination import list_response, parse_page_request
from postwire.domains.store import format_timestamp
from postwire.errors import ApiError, validation_error
from postwire.store.sandbox_inbox import HeldMessage, get_held, held_source, list_held

DEFAULT_PAGE = 20


def held_json(held: HeldMessage, raw: bytes | None = None) -> SandboxMessageObject:
    """The API's object of a held message; with `raw`, its source as text (bytes that are not
    UTF-8 become U+FFFD: `postwire sandbox show --raw` gives the exact bytes)."""
    body: SandboxMessageObject = {
        "object": "sandbox_message",
        "id": held.id,
        "from": held.sender,
        "to": held.to,
        "subject": held.subject,
        "message_id": held.message_id,
        "envelope_from": held.envelope_from,
        "recipients": held.recipients,
        "created_at": format_timestamp(held.held_at_ms),
        "size": held.size,
    }
    if raw is not None:
        body["raw"] = raw.decode("utf-8", "replace")
    return body


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("sandbox", __name__)

    @blueprint.get("/sandbox/messages")
    async def list_messages() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        team_id = current_caller().team_id
        for name, cursor in (("after", page.after), ("before", page.before)):
            if cursor is not None and get_held(ctx.spool, team_id, cursor) is None:
                raise validation_error(f"The `{name}` cursor does not match any message.")
        held, has_more = list_held(
            ctx.spool,
            team_id,
            limit=page.limit or DEFAULT_PAGE,
            after=page.after,
            before=page.before,
        )
        return list_response([dict(held_json(message)) for message in held], has_more)

    @blueprint.get("/sandbox/messages/<id:message_id>")
    async def get_message(message_id: str) -> SandboxMessageObject:
        team_id = current_caller().team_id
        held = get_held(ctx.spool, team_id, message_id)
        source = None if held is None else held_source(ctx.spool, team_id, message_id)
        if held is None or source is None:
            raise ApiError(404, "not_found", "Message not found")
        return held_json(held, source)

    return blueprint
