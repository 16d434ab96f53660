"""What the content checks read of a spooled message: its header fields, read without a MIME
parser (they are all most emails need, and the `email` package's header parsing was nearly
all of the insights' cost), and its first HTML and text bodies, parsed only for an email whose
record keeps none (SMTP submissions)."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy


def split_message(raw: bytes) -> tuple[bytes, bytes]:
    """The header block and the body of a message (CRLF or LF line ends)."""
    for separator in (b"\r\n\r\n", b"\n\n"):
        head, found, body = raw.partition(separator)
        if found:
            return head, body
    return raw, b""


# A header field (name, colon, value and its folded continuation lines), in a header block.
_FIELD = re.compile(rb"^([!-9;-~]+)[ \t]*:(.*(?:\r?\n[ \t].*)*)", re.MULTILINE)


@functools.lru_cache(maxsize=16)
def _named_fields(names: frozenset[str]) -> re.Pattern[bytes]:
    """`_FIELD` for these names only (any case): the regex engine skips every other field,
    long DKIM signatures included, without a Python step per field."""
    alternatives = b"|".join(re.escape(name.encode("ascii")) for name in sorted(names))
    return re.compile(
        rb"^(" + alternatives + rb")[ \t]*:(.*(?:\r?\n[ \t].*)*)", re.MULTILINE | re.IGNORECASE
    )


def header_fields(raw: bytes, names: Collection[str] | None = None) -> list[tuple[str, str]]:
    """Each header field's name and unfolded value, in order (RFC 5322 2.2.3); only those
    named in `names` (lower case) if given."""
    head, _ = split_message(raw)
    if names is not None:
        # Most messages have none of the named fields: one search for each name at a line's
        # start says so without the regex.
        lowered = b"\n" + head.lower()
        if not any(b"\n" + name.encode("ascii") in lowered for name in names):
            return []
    pattern = _FIELD if names is None else _named_fields(frozenset(names))
    fields = []
    for match in pattern.finditer(head):
        name = match.group(1).decode("ascii")
        value = b" ".join(line.strip() for line in match.group(2).splitlines())
        fields.append((name, value.decode("utf-8", "replace").strip()))
    return fields


def body_texts(raw: bytes) -> tuple[str | None, str | None]:
    """The first HTML and text/plain parts that are not attachments (lenient: a part that
    cannot be decoded is skipped)."""
    message = message_from_bytes(raw, policy=default_policy)
    assert isinstance(message, EmailMessage)
    bodies: dict[str, str] = {}
    for part in message.walk():
        kind = part.get_content_type()
        if kind in bodies or kind not in ("text/html", "text/plain") or part.is_attachment():
            continue
        try:
            bodies[kind] = part.get_content()
        except (LookupError, ValueError):
            continue
    return bodies.get("text/html"), bodies.get("text/plain")
