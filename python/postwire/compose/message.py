"""A validated send to RFC 5322 bytes, through `postwire._core.build_message`."""

from __future__ import annotations

from postwire import _core
from postwire.compose.request import SendRequest
from postwire.errors import MessageError, validation_error


def build_mime_message(
    request: SendRequest,
    *,
    message_id: str | None = None,
    date: int | None = None,
    utc_offset_minutes: int = 0,
    boundary_seed: str | None = None,
) -> bytes:
    """The RFC 5322 message for `request` (its attachments resolved), through
    `_core.build_message`. What the builder still refuses (an IDN that UTS 46 rejects, a word
    too long to fold) becomes 422 `validation_error` with the builder's reason."""
    attachments = [a for a in request.attachments if isinstance(a, _core.Attachment)]
    if len(attachments) != len(request.attachments):
        raise ValueError("resolve_attachments must fetch the `path` attachments first")
    try:
        return _core.build_message(
            sender=request.sender,
            to=request.to,
            cc=request.cc,
            bcc=request.bcc,
            reply_to=request.reply_to,
            subject=request.subject,
            text=request.text,
            html=request.html,
            attachments=attachments,
            headers=request.headers,
            message_id=message_id,
            date=date,
            utc_offset_minutes=utc_offset_minutes,
            boundary_seed=boundary_seed,
        )
    except MessageError as error:
        raise validation_error(f"The email cannot be built: {error}.") from error
