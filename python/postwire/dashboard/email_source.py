"""What an email's page shows of its raw source: the header fields and the HTML and text
parts, read with Python's `email` parser (lenient: a malformed part is left out, not fatal)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy

log = logging.getLogger("postwire.dashboard")


@dataclass(frozen=True, slots=True)
class SourceParts:
    headers: list[tuple[str, str]] = field(default_factory=list)
    html: str | None = None
    text: str | None = None


def source_parts(raw: bytes) -> SourceParts:
    """The header fields of `raw` (as written, unfolded) and its first HTML and text parts
    that are not attachments."""
    message = message_from_bytes(raw, policy=default_policy)
    assert isinstance(message, EmailMessage)
    headers = [(name, str(value)) for name, value in message.items()]
    html = text = None
    for part in message.walk():
        if part.is_multipart() or part.is_attachment():
            continue
        kind = part.get_content_type()
        if kind not in ("text/html", "text/plain"):
            continue
        try:
            content = part.get_content()
        except (LookupError, ValueError):  # an unknown charset, a broken encoding
            log.info("a %s part of a message could not be decoded", kind)
            continue
        if kind == "text/html" and html is None:
            html = content
        elif kind == "text/plain" and text is None:
            text = content
    return SourceParts(headers, html, text)
