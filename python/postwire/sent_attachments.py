"""A sent email's attachments, read from its source while Postwire keeps it.

Postwire keeps no copy of attachments beside the message: they are the parts of the signed
source (`store.email_details.raw_source`), which is kept while the email waits in the queue
(scheduled, queued, retrying), while the sandbox holds it, and after delivery until its
insights are computed. Once the source is gone, so are the attachments: `sent_attachments`
says None and the API answers 404 with that reason. The same reading serves mail sent through
the REST API and through SMTP.

An attachment's id is derived from the email's id and the part's place in the message
(a UUID v5), so it is the same on every read, in every process.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Final

from postwire.store.email_details import raw_source
from postwire.store.emails import EmailRecord
from postwire.store.spool import Spool

_ID_NAMESPACE: Final = uuid.UUID("6f1c1d4e-3f4b-4c55-9a55-7a0f0b7c2a11")


@dataclass(frozen=True, slots=True)
class SentAttachment:
    id: str
    filename: str | None
    content_type: str
    content_disposition: str  # "attachment" | "inline"
    content_id: str | None  # without the angle brackets
    content: bytes


def sent_attachments(spool: Spool, record: EmailRecord) -> list[SentAttachment] | None:
    """The email's attachments in the order of the message; None once its source is gone."""
    source = raw_source(spool, record)
    if source is None:
        return None
    message = message_from_bytes(source.content, policy=default_policy)
    assert isinstance(message, EmailMessage)
    found: list[SentAttachment] = []
    for position, part in enumerate(message.walk()):
        if part.is_multipart():
            continue
        disposition = part.get_content_disposition()
        filename = part.get_filename()
        content_id = str(part.get("Content-ID", "")).strip().strip("<>") or None
        # The text and HTML bodies carry neither a disposition nor a name nor an id.
        if disposition is None and filename is None and content_id is None:
            continue
        payload = part.get_payload(decode=True)
        found.append(
            SentAttachment(
                id=str(uuid.uuid5(_ID_NAMESPACE, f"{record.id}/{position}")),
                filename=filename,
                content_type=part.get_content_type(),
                content_disposition="inline" if disposition == "inline" else "attachment",
                content_id=content_id,
                content=payload if isinstance(payload, bytes) else b"",
            )
        )
    return found
