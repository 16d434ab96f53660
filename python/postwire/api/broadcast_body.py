"""The bodies of `POST /broadcasts` and `PATCH /broadcasts/{id}`, validated (pure).

`broadcast_fields` returns the record fields a body sets, by `BroadcastRecord` field name;
the handlers check what needs the store (the segment and topic exist in the caller's team,
the sender's domain is verified when it is sent).

Choices the contract leaves open:
- A draft needs its segment, `from` and `subject`; `html` or `text` is needed only to send.
- `segment_id` wins over the deprecated `audience_id` when both are given.
- `name` not given is "" (the Rust SDK requires a string); `reply_to` holds at most 50
  addresses, like `/emails`.
- Subject, HTML and text together are at most 40 MB, as one email's content is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from postwire.api.resource_ids import is_resource_id
from postwire.api.send_request import MAX_EMAIL_SIZE, MAX_RECIPIENTS
from postwire.broadcasts.messages import parse_sender
from postwire.compose.header_text import is_header_safe, is_unicode_text
from postwire.errors import ApiError, validation_error

# Body keys a PATCH may set (the SDKs add others, such as `broadcast_id`: ignored).
UPDATABLE = (
    "segment_id", "audience_id", "from", "subject", "reply_to", "html", "text", "preview_text",
    "name", "topic_id",
)  # fmt: skip
MAX_NAME_LENGTH = 256


def broadcast_fields(body: Mapping[str, Any], *, creating: bool) -> dict[str, Any]:
    """The record fields `body` sets; on create, the required ones must be there. Raises the
    contract's 422 at the first problem, in the order segment, from, subject, then the rest."""
    fields: dict[str, Any] = {}
    segment = body.get("segment_id")
    segment = body.get("audience_id") if segment is None else segment
    if segment is not None:
        fields["segment_id"] = _resource_id(segment, "segment_id")
    elif creating:
        raise ApiError(422, "missing_required_field", "Missing `segment_id` field")

    sender = body.get("from")
    if sender is not None and sender != "":
        if not isinstance(sender, str):
            raise validation_error("The `from` field must be a string.")
        parse_sender(sender)
        fields["sender"] = sender
    elif creating or "from" in body:
        raise ApiError(422, "missing_required_field", "Missing `from` field")

    subject = body.get("subject")
    if subject is not None:
        fields["subject"] = _header_text(subject, "subject")
    elif creating or "subject" in body:
        raise ApiError(422, "missing_required_field", "Missing `subject` field")

    if "reply_to" in body:
        fields["reply_to"] = _reply_to(body["reply_to"])
    for name in ("html", "text"):
        if name in body:
            fields[name] = _optional_text(body[name], name) or None
    if "preview_text" in body:
        preview = body["preview_text"]
        fields["preview_text"] = None if preview is None else _header_text(preview, "preview_text")
    if "name" in body:
        name_value = body["name"]
        fields["name"] = "" if name_value is None else _header_text(name_value, "name")
        if len(fields["name"]) > MAX_NAME_LENGTH:
            raise validation_error(
                f"The `name` field must be at most {MAX_NAME_LENGTH} characters."
            )
    if "topic_id" in body:
        topic = body["topic_id"]
        fields["topic_id"] = None if topic is None else _resource_id(topic, "topic_id")
    size = sum(len(str(fields.get(name) or "").encode()) for name in ("subject", "html", "text"))
    if size > MAX_EMAIL_SIZE:
        raise validation_error("The broadcast's subject, html and text exceed 40 MB together.")
    return fields


def names_a_change(body: Mapping[str, Any]) -> bool:
    return any(name in body for name in UPDATABLE)


def send_flag(body: Mapping[str, Any]) -> tuple[bool, str | None]:
    """`send` and `scheduled_at` of a create body; `scheduled_at` only goes with `send`."""
    send = body.get("send", False)
    if send is None:
        send = False
    if not isinstance(send, bool):
        raise validation_error("The `send` field must be a boolean.")
    scheduled = scheduled_at_of(body)
    if scheduled is not None and not send:
        raise validation_error("The `scheduled_at` field can only be used with `send: true`.")
    return send, scheduled


def scheduled_at_of(body: Mapping[str, Any]) -> str | None:
    value = body.get("scheduled_at")
    if value is not None and not isinstance(value, str):
        raise validation_error("The `scheduled_at` field must be a string.")
    return value or None


def _resource_id(value: object, field: str) -> str:
    if not isinstance(value, str) or not is_resource_id(value):
        raise validation_error(f"The `{field}` must be a valid UUID.")
    return value.lower()


def _header_text(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise validation_error(f"The `{field}` field must be a string.")
    if any(char in value for char in "\r\n\0") or not is_header_safe(value):
        raise validation_error(f"The `{field}` field must not contain line breaks or controls.")
    if not is_unicode_text(value):
        raise validation_error(f"The `{field}` field must be valid Unicode text.")
    return value


def _optional_text(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise validation_error(f"The `{field}` field must be a string.")
    if "\0" in value or not is_unicode_text(value):
        raise validation_error(f"The `{field}` field must be valid Unicode text without NUL.")
    return value


def _reply_to(value: object) -> list[str]:
    if value is None or value == "":
        return []
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
        raise validation_error("The `reply_to` field must be a string or an array of strings.")
    if len(values) > MAX_RECIPIENTS:
        raise validation_error(f"The `reply_to` field can have at most {MAX_RECIPIENTS} addresses.")
    for item in values:
        try:
            parse_sender(item)
        except ApiError:
            raise validation_error(
                "Invalid `reply_to` field. The email address needs to follow the "
                "`email@example.com` or `Name <email@example.com>` format."
            ) from None
    return list(values)
