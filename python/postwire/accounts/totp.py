"""TOTP (RFC 6238) as authenticator apps compute it: SHA-1, 6 digits, 30-second steps.

Pure functions over a secret and a time: pyotp computes the codes, this module decides which
time steps are acceptable (the current one and one either side, for clocks that drift and
codes typed near a step's end) and refuses a step already used, so a code seen over a
shoulder cannot be replayed while it is still valid.
"""

from __future__ import annotations

import hmac
import io
from typing import Final

import pyotp
import segno

STEP_SECONDS: Final = 30
DIGITS: Final = 6
# Steps accepted either side of the current one.
WINDOW: Final = 1


def new_secret() -> str:
    """A fresh base32 secret of 160 bits (RFC 4226 recommends the size of SHA-1's output)."""
    return pyotp.random_base32(length=32)


def time_step(unix_seconds: float) -> int:
    return int(unix_seconds) // STEP_SECONDS


def code_at(secret: str, step: int) -> str:
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).generate_otp(step)


def normalize_code(text: str) -> str:
    """What people type, without the spaces and dashes apps show in the middle of a code."""
    return "".join(ch for ch in text if not ch.isspace() and ch != "-")


def matching_step(secret: str, code: str, unix_seconds: float, last_step: int) -> int | None:
    """The time step whose code is `code`, within the window and after `last_step` (the last
    one accepted); None when there is none. Every candidate is compared, in constant time."""
    code = normalize_code(code)
    if len(code) != DIGITS or not code.isascii() or not code.isdigit():
        return None
    now = time_step(unix_seconds)
    found: int | None = None
    for step in range(now - WINDOW, now + WINDOW + 1):
        if hmac.compare_digest(code_at(secret, step), code) and step > last_step and found is None:
            found = step
    return found


def provisioning_uri(secret: str, account: str, issuer: str) -> str:
    """The otpauth:// URI authenticator apps read from the QR code."""
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    return totp.provisioning_uri(name=account, issuer_name=issuer)


def qr_code_svg(uri: str) -> bytes:
    """The URI as a QR code in SVG (an image served by the dashboard: no script, no CDN)."""
    out = io.BytesIO()
    segno.make(uri, error="m").save(out, kind="svg", scale=5, border=2, xmldecl=False)
    return out.getvalue()
