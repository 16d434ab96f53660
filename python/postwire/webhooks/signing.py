"""Webhook signatures in the Svix scheme (contract section 8.3), which the `svix` package and
the Resend SDKs verify.

The secret is `whsec_` and the base64 of the HMAC key. The signed content is
`{svix-id}.{svix-timestamp}.{body}`, and the signature `v1,` and the base64 of its
HMAC-SHA256.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Final

SECRET_PREFIX: Final = "whsec_"


def new_signing_secret() -> str:
    """24 random bytes, the Svix convention."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.digest(key, signed, hashlib.sha256)).decode()


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one POST of `body` (unix seconds `timestamp`)."""
    return {
        "svix-id": message_id,
        "svix-timestamp": str(timestamp),
        "svix-signature": signature(secret, message_id, timestamp, body),
    }
