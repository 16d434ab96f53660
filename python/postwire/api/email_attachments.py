"""`GET /emails/{id}/attachments[/{attachment_id}]`: a sent email's attachments, each with a
signed download URL that Postwire serves without an API key (`/downloads/attachments/<token>`).

The attachments are read from the email's source (`postwire.sent_attachments`): while Postwire
keeps it, they are listed and downloadable; once it is gone (delivered and its insights read,
or canceled), both routes answer 404 `not_found` saying so, and links handed out before stop
working too. A download URL expires `DOWNLOAD_LINK_SECONDS` after it was made.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

from quart import Blueprint, Response, request

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.email_content_models import AttachmentItem, AttachmentObject
from postwire.api.models import ListBody
from postwire.api.pagination import list_response, page_of, parse_page_request
from postwire.errors import ApiError
from postwire.public_links import open_link, sign_link
from postwire.sent_attachments import SentAttachment, sent_attachments
from postwire.store import emails as email_store
from postwire.store.emails import EmailRecord

PUBLIC_PREFIX: Final = "/downloads/attachments/"
DOWNLOAD_LINK_SECONDS: Final = 3600
_KIND: Final = "attachment"
# The bytes are the sender's: never rendered or sniffed as a page of this origin.
DOWNLOAD_POLICY: Final = "default-src 'none'; sandbox"


def iso_timestamp(ms: int) -> str:
    """The contract's ISO form for attachments and webhooks: `2024-10-27T18:30:00.000Z`."""
    return (
        datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    )


def _source_gone() -> ApiError:
    return ApiError(
        404,
        "not_found",
        "The email's attachments are no longer kept: Postwire keeps an email's source only "
        "until it is delivered and its insights are read (or it is canceled).",
    )


def _attachments_of(ctx: ApiContext, record: EmailRecord) -> list[SentAttachment]:
    found = sent_attachments(ctx.spool, record)
    if found is None:
        raise _source_gone()
    return found


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("email_attachments", __name__)

    async def item(record: EmailRecord, attachment: SentAttachment) -> AttachmentItem:
        expires_at_ms = ctx.now_ms() + DOWNLOAD_LINK_SECONDS * 1000
        token = await sign_link(
            ctx.spool, _KIND, [record.team_id, record.id, attachment.id], expires_at_ms
        )
        body: AttachmentItem = {
            "id": attachment.id,
            "size": len(attachment.content),
            "content_type": attachment.content_type,
            "content_disposition": "inline"
            if attachment.content_disposition == "inline"
            else "attachment",
            "download_url": ctx.config.api.public_url.rstrip("/") + PUBLIC_PREFIX + token,
            "expires_at": iso_timestamp(expires_at_ms),
        }
        if attachment.filename is not None:
            body["filename"] = attachment.filename
        if attachment.content_id is not None:
            body["content_id"] = attachment.content_id
        return body

    @blueprint.get("/emails/<id:email_id>/attachments")
    async def list_attachments(email_id: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        record = email_store.get_email(ctx.spool, current_caller().team_id, email_id)
        window, has_more = page_of(_attachments_of(ctx, record), page, lambda found: found.id)
        data: list[dict[str, Any]] = [dict(await item(record, found)) for found in window]
        return list_response(data, has_more)

    @blueprint.get("/emails/<id:email_id>/attachments/<id:attachment_id>")
    async def get_attachment(email_id: str, attachment_id: str) -> AttachmentObject:
        record = email_store.get_email(ctx.spool, current_caller().team_id, email_id)
        for found in _attachments_of(ctx, record):
            if found.id == attachment_id.lower():
                return {"object": "attachment", **await item(record, found)}
        raise ApiError(404, "not_found", "Attachment not found")

    @blueprint.get(PUBLIC_PREFIX + "<token>")
    async def download(token: str) -> Response:
        fields = await open_link(ctx.spool, _KIND, token, ctx.now_ms())
        if fields is None or len(fields) != 3:
            raise ApiError(404, "not_found", "This download link is not valid or has expired.")
        team_id, email_id, attachment_id = fields
        record = email_store.get_email(ctx.spool, team_id, email_id)
        for found in _attachments_of(ctx, record):
            if found.id == attachment_id:
                name = found.filename or found.id
                return Response(
                    found.content,
                    content_type=found.content_type,
                    headers={
                        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
                        "X-Content-Type-Options": "nosniff",
                        "Content-Security-Policy": DOWNLOAD_POLICY,
                        "Cache-Control": "private, no-store",
                        "Referrer-Policy": "no-referrer",
                    },
                )
        raise ApiError(404, "not_found", "Attachment not found")

    return blueprint
