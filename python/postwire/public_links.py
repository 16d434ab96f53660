"""Signed, expiring links that Postwire serves without an API key: the download of a sent
email's attachment and the shared view of an email.

A token is `base64url(JSON [kind, fields..., expires_at_ms])` + `.` + `base64url(tag)`, the tag
an HMAC-SHA256 of the payload under the spool's secret `public-links`, so every process and
every restart read the links any of them made. The kind is inside the signed payload: a token
made for one kind of link never opens another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Final

from postwire.store.server_secrets import server_secret
from postwire.store.spool import Spool

SECRET_NAME: Final = "public-links"
# A token longer than this is not one of ours (a few ids and a time make ~200 characters).
MAX_TOKEN_CHARS: Final = 1024


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def sign_link(spool: Spool, kind: str, fields: list[str], expires_at_ms: int) -> str:
    """A token naming `fields` for links of `kind`, valid until `expires_at_ms`."""
    payload = json.dumps([kind, *fields, expires_at_ms], separators=(",", ":")).encode()
    secret = await server_secret(spool, SECRET_NAME)
    return _b64(payload) + "." + _b64(hmac.new(secret, payload, hashlib.sha256).digest())


async def open_link(spool: Spool, kind: str, token: str, now_ms: int) -> list[str] | None:
    """The fields of a token of `kind` that Postwire signed and that has not expired; None for
    anything else (forged, altered, of another kind, expired, malformed)."""
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        return None
    encoded, tag_text = token.split(".")
    try:
        payload, tag = _unb64(encoded), _unb64(tag_text)
    except (binascii.Error, ValueError):
        return None
    secret = await server_secret(spool, SECRET_NAME)
    if not hmac.compare_digest(tag, hmac.new(secret, payload, hashlib.sha256).digest()):
        return None
    values = json.loads(payload)
    if values[0] != kind or not isinstance(values[-1], int) or values[-1] <= now_ms:
        return None
    return [str(value) for value in values[1:-1]]
