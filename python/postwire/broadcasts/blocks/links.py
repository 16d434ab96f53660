"""Which URLs a document may link to: http(s) with a host, or mailto with an address.

Anything else (`javascript:`, `data:`, relative paths, a link still being typed) is reported by
the checks and rendered as plain text, never as a link. Placeholders may fill in parts after the
scheme and host (`https://example.com/?e={{{contact.email}}}`): the scheme is the author's.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def is_safe_link(url: str, *, images_only: bool = False) -> bool:
    """True for an http(s) URL with a host, or (unless `images_only`) a mailto: address."""
    if not url or any(character in url for character in '"<>\\') or not url.isprintable():
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        host = parts.hostname or ""
        return bool(host) and "{" not in host and url.lower().startswith(scheme + "://")
    if scheme == "mailto" and not images_only:
        return "@" in parts.path
    return False
