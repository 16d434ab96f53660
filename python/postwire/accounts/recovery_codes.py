"""Recovery codes: ten single-use codes, shown once when made, kept only as SHA-256.

A code is 16 characters of a 32-letter alphabet (80 random bits), shown in groups of four:
that much randomness makes a fast hash the right one (no dictionary to try), and the
comparison is by digest, in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

CODE_COUNT: Final = 10
_ALPHABET: Final = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: read from paper
_LENGTH: Final = 16
_GROUP: Final = 4


def new_codes() -> list[str]:
    """CODE_COUNT fresh codes, as shown to the user: `abcd-efgh-jkmn-pqrs`."""
    codes = []
    for _ in range(CODE_COUNT):
        raw = "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH))
        codes.append("-".join(raw[i : i + _GROUP] for i in range(0, _LENGTH, _GROUP)))
    return codes


def normalize(code: str) -> str:
    """A typed code without its dashes and spaces, in lower case."""
    return "".join(ch for ch in code.lower() if ch.isalnum())


def code_sha256(code: str) -> str:
    return hashlib.sha256(normalize(code).encode()).hexdigest()


def looks_like_recovery_code(text: str) -> bool:
    code = normalize(text)
    return len(code) == _LENGTH and all(ch in _ALPHABET for ch in code)


def matching_digest(code: str, unused: list[str]) -> str | None:
    """The stored digest `code` matches among `unused`, compared in constant time; else None."""
    digest = code_sha256(code)
    found: str | None = None
    for stored in unused:
        if hmac.compare_digest(stored, digest) and found is None:
            found = stored
    return found
