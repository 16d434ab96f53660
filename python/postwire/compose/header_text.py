"""What may stand in a header value: the rules the MIME builder enforces, checked early so a
refusal is a clear error rather than a failed build."""

from __future__ import annotations

import re

# C0 controls but tab, DEL, C1 controls: one search, where a loop over characters was a fifth
# of the address checks of a CSV import.
_HEADER_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def is_header_safe(value: str) -> bool:
    """No C0 control but tab, no DEL, no C1 control: what the MIME builder takes in headers."""
    return _HEADER_UNSAFE.search(value) is None


def is_unicode_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
