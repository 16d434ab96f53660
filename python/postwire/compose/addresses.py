"""Mailboxes and addresses: the rules every front door applies alike (REST and SMTP)."""

from __future__ import annotations

import re

from postwire.compose.header_text import is_header_safe, is_unicode_text

Mailbox = tuple[str | None, str]
"""`(display name or None, address)`, as `_core.build_message` takes them."""

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-\u0080-\U0010ffff]"
_LOCAL_PART = re.compile(rf"{_ATEXT}+(?:\.{_ATEXT}+)*")
_ASCII_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_QUOTED_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)


def parse_mailbox(value: str) -> Mailbox | None:
    """`a@b`, `Name <a@b>` or `"Quoted, Name" <a@b>` as `(name, address)`; None when `value`
    is not exactly one such mailbox.

    The address is a dot-atom local part (ASCII or UTF-8) and a domain of at least two labels
    (ASCII or IDN). An unquoted name may not hold `<>",;`: a comma or semicolon there reads as
    a list of addresses, which one string may not be.
    """
    text = value.strip(" \t")
    if not text.endswith(">"):
        return (None, text) if is_address(text) else None
    start = text.rfind("<")
    if start < 0:
        return None
    address = text[start + 1 : -1]
    name_part = text[:start].strip(" \t")
    name: str | None
    if not name_part:
        name = None
    elif name_part.startswith('"'):
        quoted = _QUOTED_NAME.fullmatch(name_part)
        if quoted is None:
            return None
        name = re.sub(r"\\(.)", r"\1", quoted[1], flags=re.DOTALL) or None
    elif any(char in name_part for char in '<>",;'):
        return None
    else:
        name = name_part
    if name is not None and not (is_header_safe(name) and is_unicode_text(name)):
        return None
    return (name, address) if is_address(address) else None


def is_address(address: str) -> bool:
    """A bare address (`local@domain`) Postwire sends to or from."""
    local, at, domain = address.rpartition("@")
    if not at or not is_unicode_text(address) or not is_header_safe(address):
        return False
    if any(char.isspace() for char in address) or len(address.encode()) > 254:
        return False
    if len(local.encode()) > 64 or not _LOCAL_PART.fullmatch(local):
        return False
    labels = domain.split(".")
    if len(labels) < 2 or len(domain) > 253 or labels[-1].isdigit():
        return False
    return all(_is_domain_label(label) for label in labels)


def _is_domain_label(label: str) -> bool:
    if not 1 <= len(label) <= 63:
        return False
    if label.isascii():
        return _ASCII_LABEL.fullmatch(label) is not None
    # An IDN label; the MIME builder converts it to punycode (UTS 46) and checks it fully.
    return all(char.isalnum() or char == "-" for char in label) and label[0] != "-" != label[-1]
