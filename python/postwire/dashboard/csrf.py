"""CSRF tokens: every POST, PUT, PATCH and DELETE carries one (form field `csrf_token`, or
header `X-CSRF-Token` for fetch), compared in constant time with the one expected.

A signed-in browser's token is its session's (random, stored with it, renewed when the session
is). A signed-out browser (the login and signup forms) gets a random token in its own cookie,
and the form must repeat it (double submit): another site can neither read nor set it.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Final

from markupsafe import Markup, escape

FIELD: Final = "csrf_token"
HEADER: Final = "X-CSRF-Token"
ANONYMOUS_COOKIE: Final = "pw_csrf"
UNSAFE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class CsrfRefused(Exception):
    """The request's token is missing or not the expected one."""


def new_anonymous_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(presented: str | None, expected: str | None) -> None:
    if not presented or not expected:
        raise CsrfRefused
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        raise CsrfRefused


def hidden_field(token: str) -> Markup:
    return Markup(f'<input type="hidden" name="{FIELD}" value="{escape(token)}">')
