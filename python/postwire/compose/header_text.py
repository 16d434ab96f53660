"""What may stand in a header value: the rules the MIME builder enforces, checked early so a
refusal is a clear error rather than a failed build."""

from __future__ import annotations


def is_header_safe(value: str) -> bool:
    """No C0 control but tab, no DEL, no C1 control: what the MIME builder takes in headers."""
    return not any(
        (ord(char) < 0x20 and char != "\t") or 0x7F <= ord(char) <= 0x9F for char in value
    )


def is_unicode_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
