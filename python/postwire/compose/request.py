"""A validated send: what to compose, whichever front door it came through."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from postwire import _core
from postwire.compose.addresses import Mailbox


@dataclass(frozen=True, slots=True)
class RemoteAttachment:
    """An attachment given by `path`: its bytes are fetched before the message is built."""

    url: str
    filename: str | None
    content_type: str | None
    content_id: str | None
    field: str
    """Where it stands in the request, e.g. `attachments[2]`, for error messages."""


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    value: str


@dataclass(frozen=True)
class SendRequest:
    """One email to send, validated. Mailboxes are parsed; the `*_as_sent` fields keep the
    client's strings for the API's email object."""

    sender: Mailbox
    to: tuple[Mailbox, ...]
    cc: tuple[Mailbox, ...]
    bcc: tuple[Mailbox, ...]
    reply_to: tuple[Mailbox, ...]
    from_as_sent: str
    to_as_sent: tuple[str, ...]
    cc_as_sent: tuple[str, ...]
    bcc_as_sent: tuple[str, ...]
    reply_to_as_sent: tuple[str, ...]
    subject: str
    html: str | None
    text: str | None
    """As sent, or generated from `html` when absent; None when `text` was `""`."""
    headers: tuple[tuple[str, str], ...]
    tags: tuple[Tag, ...]
    attachments: tuple[_core.Attachment | RemoteAttachment, ...]
    scheduled_at: datetime | None
    """Aware, UTC."""
    size: int
    """Bytes counted against the 40 MB limit so far (remote attachments once fetched)."""
    template_id: str | None = None
    """The template the content was rendered from."""
    broadcast_id: str | None = None
    """The broadcast this email is one message of."""

    @property
    def has_remote_attachments(self) -> bool:
        return any(isinstance(a, RemoteAttachment) for a in self.attachments)
