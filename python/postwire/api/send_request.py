"""The send body of `POST /emails` (and of each `POST /emails/batch` item), validated.

`parse_send_request` is pure: it checks every field in the order Resend does (to, html/text,
subject, from, then the optional fields), refuses what the MIME builder would refuse (so a
header injection is a 422, not a 500), and returns a `SendRequest` (`postwire.compose`) ready
to be built. Attachments given by `path` need the network: they stay `RemoteAttachment`s until
`resolve_attachments` fetches them.

Choices the contract leaves open:
- cc, bcc and reply_to are capped at 50 addresses each, like `to`.
- A tag's `value` may be left out (the Python SDK marks it optional); it is then "".
- `content` wins over `path` when an attachment has both; an attachment given by `path`
  without a `filename` is named after the last segment of the URL's path.
- The 40 MB limit counts subject, html, text and headers as sent (not the generated text) plus
  each attachment's base64 length.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from postwire import _core
from postwire.api.attachments import (
    base64_size,
    decode_attachment_content,
    fetch_attachment,
    filename_from_url,
    refuse_forbidden_file_type,
)
from postwire.api.scheduling import parse_scheduled_at
from postwire.compose.addresses import Mailbox, parse_mailbox, recipient_problem
from postwire.compose.header_text import is_header_safe, is_unicode_text
from postwire.compose.html_text import html_to_text
from postwire.compose.request import RemoteAttachment, SendRequest, Tag
from postwire.errors import ApiError, validation_error
from postwire.outbound_http import IPNetwork, Resolver, parse_http_url, resolve_host
from postwire.templates.sending import (
    TemplateLookup,
    parse_template_field,
    template_not_found,
    templated_body,
)

BatchMode = Literal["strict", "permissive"]

MAX_EMAIL_SIZE = 40 * 1024 * 1024
MAX_RECIPIENTS = 50
MAX_BATCH_SIZE = 100
MAX_TAG_LENGTH = 256
MAX_CONTENT_ID_LENGTH = 127  # the contract: "< 128 chars"
MAX_FILENAME_OCTETS = 255  # the MIME builder's limit
DEFAULT_FETCH_TIMEOUT = 30.0

# Headers the MIME builder writes itself (it refuses them in `headers`), by lower-case name,
# with the body field that sets them where there is one.
_STRUCTURAL_HEADERS: dict[str, str | None] = {
    "from": "from",
    "to": "to",
    "cc": "cc",
    "bcc": "bcc",
    "reply-to": "reply_to",
    "subject": "subject",
    "date": None,
    "message-id": None,
    "mime-version": None,
    "content-type": None,
    "content-transfer-encoding": None,
}

_HEADER_NAME = re.compile(r"[!-9;-~]+")  # printable ASCII except ":" (RFC 5322 ftext)
_TAG_TEXT = re.compile(rf"[A-Za-z0-9_-]{{0,{MAX_TAG_LENGTH}}}")
_MIME_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")


@dataclass(frozen=True)
class BatchRequest:
    """A validated `POST /emails/batch` body. In strict mode every entry is a `SendRequest`;
    in permissive mode an invalid email is its `ApiError`. Entries keep the request's order
    and carry their index in it."""

    mode: BatchMode
    entries: tuple[tuple[int, SendRequest | ApiError], ...]

    @property
    def valid(self) -> list[tuple[int, SendRequest]]:
        return [(i, e) for i, e in self.entries if isinstance(e, SendRequest)]

    @property
    def errors(self) -> list[tuple[int, ApiError]]:
        return [(i, e) for i, e in self.entries if isinstance(e, ApiError)]


def parse_send_request(
    body: object,
    *,
    now: datetime,
    allow_attachments: bool = True,
    max_total_bytes: int = MAX_EMAIL_SIZE,
    templates: TemplateLookup | None = None,
) -> SendRequest:
    """Validate a send body; raise `ApiError` (422) at the first problem, in the contract's
    order. `now` is the reference for `scheduled_at`; `templates` finds the template a body
    names (none can be used without it)."""
    if not isinstance(body, dict):
        raise validation_error("The request body must be a JSON object.")
    return _parse_send_object(
        body,
        now=now,
        allow_attachments=allow_attachments,
        max_total_bytes=max_total_bytes,
        templates=templates,
    )


def parse_batch_request(
    body: object, *, now: datetime, mode: BatchMode, templates: TemplateLookup | None = None
) -> BatchRequest:
    """Validate a batch body: 1 to 100 send objects, without attachments. Strict mode raises
    the first invalid email's error, its index in the message; permissive mode keeps it."""
    if not isinstance(body, list):
        raise validation_error("The `request.body` field must be an `array`.")
    if not 1 <= len(body) <= MAX_BATCH_SIZE:
        raise validation_error(
            f"The batch must contain between 1 and {MAX_BATCH_SIZE} emails, not {len(body)}."
        )
    entries: list[tuple[int, SendRequest | ApiError]] = []
    for index, item in enumerate(body):
        try:
            if not isinstance(item, dict):
                raise validation_error("Each email must be a JSON object.")
            entry: SendRequest | ApiError = _parse_send_object(
                item,
                now=now,
                allow_attachments=False,
                max_total_bytes=MAX_EMAIL_SIZE,
                templates=templates,
            )
        except ApiError as error:
            if mode == "strict":
                raise ApiError(
                    error.status, error.name, f"Email at index {index}: {error.message}"
                ) from None
            entry = error
        entries.append((index, entry))
    return BatchRequest(mode, tuple(entries))


def parse_batch_validation_header(value: str | None) -> BatchMode:
    """The `x-batch-validation` header: `strict` (also when absent) or `permissive`."""
    mode = (value or "strict").strip().lower()
    if mode == "strict":
        return "strict"
    if mode == "permissive":
        return "permissive"
    raise validation_error("The `x-batch-validation` header must be `strict` or `permissive`.")


def _parse_send_object(
    body: Mapping[str, object],
    *,
    now: datetime,
    allow_attachments: bool,
    max_total_bytes: int,
    templates: TemplateLookup | None,
) -> SendRequest:
    to, to_as_sent = _parse_mailboxes(body, "to", required=True, recipients=True)

    template_id = None
    if body.get("template") is not None:
        # The rendered template stands in for html, text and the defaults it holds.
        reference = parse_template_field(body)
        content = None if templates is None else templates(reference.id_or_alias)
        if content is None:
            raise template_not_found()
        body = templated_body(body, content, reference.variables)
        template_id = content.template_id

    html = _optional_body_text(body, "html")
    text = _optional_body_text(body, "text")
    if not html and not text:
        raise ApiError(422, "missing_required_field", "Missing `html` or `text` field")
    if text is None and html:
        text = html_to_text(html) or None
    elif text == "":
        text = None

    subject = body.get("subject")
    if subject is None:
        raise ApiError(422, "missing_required_field", "Missing `subject` field")
    if not isinstance(subject, str):
        raise validation_error("The `subject` field must be a string.")
    _refuse_header_controls(subject, "The `subject` field")

    sender_value = body.get("from")
    if sender_value is None or sender_value == "":
        raise ApiError(422, "missing_required_field", "Missing `from` field")
    if not isinstance(sender_value, str):
        raise validation_error("The `from` field must be a string.")
    sender = _parse_mailbox_or_refuse(sender_value, "from")

    cc, cc_as_sent = _parse_mailboxes(body, "cc", recipients=True)
    bcc, bcc_as_sent = _parse_mailboxes(body, "bcc", recipients=True)
    # Node sends `replyTo` as `reply_to`; older clients and hand-written ones send `replyTo`.
    reply_to_key = "replyTo" if body.get("reply_to") is None and "replyTo" in body else "reply_to"
    reply_to, reply_to_as_sent = _parse_mailboxes(body, reply_to_key)

    headers = _parse_headers(body.get("headers"))
    tags = _parse_tags(body.get("tags"))
    attachments = _parse_attachments(body.get("attachments"), allow_attachments)

    scheduled_value = body.get("scheduled_at")
    scheduled_at = None
    if scheduled_value is not None:
        if not isinstance(scheduled_value, str):
            raise validation_error("The `scheduled_at` field must be a string.")
        scheduled_at = parse_scheduled_at(scheduled_value, now)

    size = sum(_utf8_size(part) for part in (subject, html, body.get("text")))
    size += sum(_utf8_size(name) + _utf8_size(value) for name, value in headers)
    size += sum(base64_size(len(a.content)) for a in attachments if isinstance(a, _core.Attachment))
    _refuse_oversize(size, max_total_bytes)

    return SendRequest(
        sender=sender,
        to=to,
        cc=cc,
        bcc=bcc,
        reply_to=reply_to,
        from_as_sent=sender_value,
        to_as_sent=to_as_sent,
        cc_as_sent=cc_as_sent,
        bcc_as_sent=bcc_as_sent,
        reply_to_as_sent=reply_to_as_sent,
        subject=subject,
        html=html or None,
        text=text,
        headers=headers,
        tags=tags,
        attachments=attachments,
        scheduled_at=scheduled_at,
        size=size,
        template_id=template_id,
    )


# --- addresses ---------------------------------------------------------------------------------


def _invalid_address_message(field: str) -> str:
    return (
        f"Invalid `{field}` field. The email address needs to follow the "
        "`email@example.com` or `Name <email@example.com>` format."
    )


def _parse_mailbox_or_refuse(value: str, field: str) -> Mailbox:
    mailbox = parse_mailbox(value)
    if mailbox is None:
        raise validation_error(_invalid_address_message(field))
    return mailbox


def _parse_mailboxes(
    body: Mapping[str, object], field: str, *, required: bool = False, recipients: bool = False
) -> tuple[tuple[Mailbox, ...], tuple[str, ...]]:
    """The mailboxes of `field`; `recipients`: they are sent to, so each must be a public
    address (`recipient_problem`)."""
    value = body.get(field)
    if value is None or value == "" or value == []:
        if required:
            raise ApiError(422, "missing_required_field", f"Missing `{field}` field")
        return (), ()
    if isinstance(value, str):
        values: list[object] = [value]
    elif isinstance(value, list):
        values = value
    else:
        raise validation_error(f"The `{field}` field must be a string or an array of strings.")
    if not all(isinstance(item, str) for item in values):
        raise validation_error(f"The `{field}` field must be a string or an array of strings.")
    as_sent = tuple(str(item) for item in values)
    if len(as_sent) > MAX_RECIPIENTS:
        raise validation_error(
            f"The `{field}` field can have at most {MAX_RECIPIENTS} email addresses."
        )
    mailboxes = tuple(_parse_mailbox_or_refuse(item, field) for item in as_sent)
    for _, address in mailboxes if recipients else ():
        problem = recipient_problem(address)
        if problem is not None:
            raise validation_error(f"Invalid `{field}` field: `{address}`: {problem}.")
    return mailboxes, as_sent


# --- text fields and headers -------------------------------------------------------------------


def _optional_body_text(body: Mapping[str, object], field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise validation_error(f"The `{field}` field must be a string.")
    if "\0" in value:
        raise validation_error(f"The `{field}` field must not contain NUL characters.")
    if not is_unicode_text(value):
        raise validation_error(f"The `{field}` field must be valid Unicode text.")
    return value


def _refuse_header_controls(value: str, what: str) -> None:
    """Refuse what would break out of a header line (CR, LF, NUL) or that the MIME builder
    refuses in headers (other control characters; tab is fine), and unpaired surrogates
    (valid JSON escapes that no UTF-8 encoder takes)."""
    if any(char in value for char in "\r\n\0"):
        raise validation_error(f"{what} must not contain line breaks or NUL characters.")
    if not is_header_safe(value):
        raise validation_error(f"{what} must not contain control characters.")
    if not is_unicode_text(value):
        raise validation_error(f"{what} must be valid Unicode text.")


def _parse_headers(value: object) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise validation_error("The `headers` field must be an object of string values.")
    headers: list[tuple[str, str]] = []
    for name, header_value in value.items():
        if not _HEADER_NAME.fullmatch(name):
            raise validation_error(
                "The `headers` field has an invalid header name: names are printable ASCII "
                "without spaces or colons."
            )
        if name.lower() in _STRUCTURAL_HEADERS:
            field = _STRUCTURAL_HEADERS[name.lower()]
            raise validation_error(
                f"The `{name}` header cannot be set in `headers`; use the `{field}` field."
                if field
                else f"The `{name}` header is written by Postwire and cannot be set in `headers`."
            )
        if not isinstance(header_value, str):
            raise validation_error(f"The `headers` value of `{name}` must be a string.")
        _refuse_header_controls(header_value, f"The `headers` value of `{name}`")
        if name.lower() == "sender" and parse_mailbox(header_value) is None:
            # Its domain is then checked like the `from` domain's.
            raise validation_error(
                f"The `{name}` header must be one email address, `email@example.com` or "
                "`Name <email@example.com>`."
            )
        headers.append((name, header_value))
    return tuple(headers)


def _parse_tags(value: object) -> tuple[Tag, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise validation_error("The `tags` field must be an array of `{name, value}` objects.")
    tags: list[Tag] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise validation_error(f"The `tags[{index}]` field must be a `{{name, value}}` object.")
        name = item.get("name")
        if not isinstance(name, str) or not name or not _TAG_TEXT.fullmatch(name):
            raise validation_error(
                f"The `tags[{index}].name` field must be 1 to {MAX_TAG_LENGTH} ASCII letters, "
                "numbers, underscores or dashes."
            )
        tag_value = item.get("value")
        if tag_value is None:
            tag_value = ""
        if not isinstance(tag_value, str) or not _TAG_TEXT.fullmatch(tag_value):
            raise validation_error(
                f"The `tags[{index}].value` field must be at most {MAX_TAG_LENGTH} ASCII "
                "letters, numbers, underscores or dashes."
            )
        tags.append(Tag(name, tag_value))
    return tuple(tags)


# --- attachments -------------------------------------------------------------------------------


def _parse_attachments(
    value: object, allow_attachments: bool
) -> tuple[_core.Attachment | RemoteAttachment, ...]:
    if value is None or value == []:
        return ()
    if not allow_attachments:
        raise validation_error("The `attachments` field is not supported for batch emails.")
    if not isinstance(value, list):
        raise validation_error("The `attachments` field must be an array of attachment objects.")
    return tuple(_parse_attachment(item, f"attachments[{i}]") for i, item in enumerate(value))


def _parse_attachment(value: object, field: str) -> _core.Attachment | RemoteAttachment:
    if not isinstance(value, dict):
        raise validation_error(f"The `{field}` field must be an attachment object.")
    content = value.get("content")
    path = value.get("path")
    if content is None and path is None:
        raise ApiError(
            422, "invalid_attachment", "Attachment must have either a `content` or `path`."
        )
    filename = _attachment_filename(value.get("filename"), field)
    content_type = _attachment_content_type(
        _first_given(value, "content_type", "contentType"), field
    )
    content_id = _attachment_content_id(
        _first_given(value, "content_id", "inline_content_id"), field
    )
    if content is not None:
        data = decode_attachment_content(content, f"{field}.content")
        return _core.Attachment(data, filename, content_type, content_id)

    if not isinstance(path, str) or parse_http_url(path) is None:
        raise validation_error(f"The `{field}.path` field must be an http or https URL.")
    if filename is None:
        named = filename_from_url(path)
        if named is not None and _is_filename(named):
            refuse_forbidden_file_type(named, f"{field}.path")
            filename = named
    return RemoteAttachment(path, filename, content_type, content_id, field)


def _first_given(value: Mapping[str, object], *spellings: str) -> object:
    """The first of the SDKs' spellings of a field that holds something; "" counts as absent
    (an SDK may send one spelling empty and the other filled)."""
    return next((value[key] for key in spellings if value.get(key) not in (None, "")), None)


def _attachment_filename(value: object, field: str) -> str | None:
    # Node's type allows `filename: false` for "no name".
    if value is None or value is False:
        return None
    if not isinstance(value, str):
        raise validation_error(f"The `{field}.filename` field must be a string.")
    _refuse_header_controls(value, f"The `{field}.filename` field")
    if not _is_filename(value):
        raise validation_error(
            f"The `{field}.filename` field must be at most {MAX_FILENAME_OCTETS} bytes long."
        )
    refuse_forbidden_file_type(value, f"{field}.filename")
    return value or None


def _is_filename(name: str) -> bool:
    return (
        is_unicode_text(name) and len(name.encode()) <= MAX_FILENAME_OCTETS and is_header_safe(name)
    )


def _attachment_content_type(value: object, field: str) -> str | None:
    if value is None:
        return None
    # Parameters (`; charset=...`) are dropped: the core writes the media type alone.
    mime_type = value.partition(";")[0].strip().lower() if isinstance(value, str) else ""
    if not _MIME_TYPE.fullmatch(mime_type) or mime_type.startswith("multipart/"):
        raise validation_error(
            f"The `{field}.content_type` field must be a MIME type such as `application/pdf`."
        )
    return mime_type


def _attachment_content_id(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise validation_error(f"The `{field}.content_id` field must be a string.")
    _refuse_header_controls(value, f"The `{field}.content_id` field")
    if not value or len(value) > MAX_CONTENT_ID_LENGTH or " " in value:
        raise validation_error(
            f"The `{field}.content_id` field must be 1 to {MAX_CONTENT_ID_LENGTH} characters "
            "without spaces."
        )
    return value


# --- size --------------------------------------------------------------------------------------


def _utf8_size(value: object) -> int:
    return len(value.encode()) if isinstance(value, str) else 0


def _refuse_oversize(size: int, limit: int) -> None:
    if size > limit:
        raise validation_error(
            f"The email must not be larger than {limit / 2**20:g} MB, attachments counted "
            "after base64 encoding."
        )


async def resolve_attachments(
    request: SendRequest,
    *,
    allow_private: bool,
    max_total_bytes: int = MAX_EMAIL_SIZE,
    timeout: float = DEFAULT_FETCH_TIMEOUT,
    allowed_networks: Sequence[IPNetwork] = (),
    resolve: Resolver = resolve_host,
) -> SendRequest:
    """Fetch the request's `path` attachments, one after the other, each within `timeout`
    seconds and the size left under `max_total_bytes`. Returns the request with every
    attachment a `_core.Attachment`; raises 422 `invalid_attachment` for one that cannot be
    fetched (see `fetch_attachment`)."""
    if not request.has_remote_attachments:
        return request
    size = request.size
    resolved: list[_core.Attachment] = []
    for attachment in request.attachments:
        if isinstance(attachment, _core.Attachment):
            resolved.append(attachment)
            continue
        content = await fetch_attachment(
            attachment.url,
            allow_private=allow_private,
            max_bytes=max(0, (max_total_bytes - size) * 3 // 4),
            timeout=timeout,
            allowed_networks=allowed_networks,
            resolve=resolve,
            field=f"{attachment.field}.path",
        )
        size += base64_size(len(content))
        _refuse_oversize(size, max_total_bytes)
        resolved.append(
            _core.Attachment(
                content, attachment.filename, attachment.content_type, attachment.content_id
            )
        )
    return dataclasses.replace(request, attachments=tuple(resolved), size=size)
