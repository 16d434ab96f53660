"""Where to go after login: only a path on this origin, so a link cannot send someone who
signs in to another site (an open redirect)."""

from __future__ import annotations

from typing import Final

DEFAULT_NEXT: Final = "/emails"
_MAX_LENGTH: Final = 2000


def safe_next(candidate: str | None) -> str:
    """`candidate` if it is a local path, else the Emails page.

    A local path starts with one "/" and is neither "//host" nor "/\\host" (browsers read a
    backslash as a slash); control characters and non-ASCII are refused too, so nothing can
    split the Location header or hide a host."""
    if not candidate or len(candidate) > _MAX_LENGTH:
        return DEFAULT_NEXT
    if not candidate.startswith("/") or candidate[1:2] in ("/", "\\"):
        return DEFAULT_NEXT
    if "\\" in candidate or any(not (0x20 < ord(c) < 0x7F) for c in candidate):
        return DEFAULT_NEXT
    return candidate
