"""Single-use, expiring links: invitations, password resets, address checks, first passwords.

A link carries a token `{lookup}.{secret}`: the lookup part finds the record without a scan,
the secret (256 random bits) is compared by SHA-256 in constant time, as API keys are. Only
the hash is stored, so a copy of the spool holds no working link. A link is used inside
`redeem_link`: the record is marked used in the same commit as the change it authorises (a
password set, a membership added), guarded by the link's key, so two clicks at once cannot
both pass. An unknown, tampered, expired, used or wrong-purpose token gets the same answer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from postwire._core import WriteBatch
from postwire.store.invitations import (
    AuthLinkRecord,
    add_link,
    get_link,
    link_lock_key,
    mark_link_used,
)
from postwire.store.spool import Spool

LinkPurpose = Literal["invite", "reset_password", "verify_email", "set_password"]
LINK_PURPOSES: Final[tuple[LinkPurpose, ...]] = (
    "invite",
    "reset_password",
    "verify_email",
    "set_password",
)

# How long each kind of link works.
INVITE_TTL: Final = timedelta(days=7)
RESET_PASSWORD_TTL: Final = timedelta(hours=1)
VERIFY_EMAIL_TTL: Final = timedelta(days=2)
SET_PASSWORD_TTL: Final = timedelta(days=3)

# The dashboard path each kind of link opens, before its token.
LINK_PATHS: Final[dict[str, str]] = {
    "invite": "/invite/",
    "reset_password": "/password/reset/",
    "verify_email": "/verify/",
    "set_password": "/password/set/",
}

REFUSAL: Final = (
    "This link does not work: it may have expired or been used already, or it was copied "
    "incompletely. Ask for a new one."
)

_LOOKUP_BYTES: Final = 9  # 12 URL-safe characters
_SECRET_BYTES: Final = 32


class LinkRefused(Exception):
    """A token that opens nothing: unknown, altered, expired, used, or for another purpose."""

    def __init__(self) -> None:
        super().__init__(REFUSAL)


@dataclass(frozen=True, slots=True)
class LinkRedemption:
    """A link being used: add the change it authorises to `batch`; it commits with the mark."""

    link: AuthLinkRecord
    batch: WriteBatch


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def new_link(
    purpose: LinkPurpose,
    *,
    email: str,
    ttl: timedelta,
    now: datetime,
    user_id: str | None = None,
    team_id: str | None = None,
    invitation_id: str | None = None,
) -> tuple[str, AuthLinkRecord]:
    """A fresh token and the record to store for it (see `add_link` to write it)."""
    if purpose not in LINK_PURPOSES:
        raise ValueError(f"unknown link purpose {purpose!r}")
    lookup = secrets.token_urlsafe(_LOOKUP_BYTES)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    record = AuthLinkRecord(
        lookup=lookup,
        secret_sha256=_sha256(secret),
        purpose=purpose,
        email=email,
        user_id=user_id,
        team_id=team_id,
        invitation_id=invitation_id,
        created_at_ms=_millis(now),
        expires_at_ms=_millis(now + ttl),
    )
    return f"{lookup}.{secret}", record


async def issue_link(
    spool: Spool,
    purpose: LinkPurpose,
    *,
    email: str,
    ttl: timedelta,
    now: datetime,
    user_id: str | None = None,
    team_id: str | None = None,
    invitation_id: str | None = None,
) -> tuple[str, AuthLinkRecord]:
    """Store a new link; return its token (for the URL, never stored) and its record."""
    token, record = new_link(
        purpose,
        email=email,
        ttl=ttl,
        now=now,
        user_id=user_id,
        team_id=team_id,
        invitation_id=invitation_id,
    )
    batch = WriteBatch()
    add_link(spool, batch, record, _millis(now))
    await spool.commit(batch)
    return token, record


def link_url(public_url: str, purpose: LinkPurpose, token: str) -> str:
    """The address a person opens: `dashboard.public_url` and the purpose's path."""
    return public_url.rstrip("/") + LINK_PATHS[purpose] + token


def _split(token: str) -> tuple[str, str] | None:
    lookup, dot, secret = token.partition(".")
    if not dot or not lookup or not secret or len(token) > 200:
        return None
    return lookup, secret


def check_link(
    spool: Spool, token: str, purposes: tuple[LinkPurpose, ...], now: datetime
) -> AuthLinkRecord:
    """The live link `token` opens for one of `purposes`, not using it (a form is shown
    first, the link is used when it is sent); `LinkRefused` otherwise."""
    parts = _split(token)
    link = None if parts is None else get_link(spool, parts[0])
    # Hash even when nothing was found, so timing does not tell whether the lookup exists.
    presented = _sha256("" if parts is None else parts[1])
    expected = link.secret_sha256 if link is not None else "0" * 64
    matches = hmac.compare_digest(presented, expected)
    if link is None or not matches:
        raise LinkRefused
    if link.purpose not in purposes or link.used_at_ms is not None:
        raise LinkRefused
    if _millis(now) >= link.expires_at_ms:
        raise LinkRefused
    return link


@asynccontextmanager
async def redeem_link(
    spool: Spool, token: str, purposes: tuple[LinkPurpose, ...], now: datetime
) -> AsyncIterator[LinkRedemption]:
    """Use a link: yields its record and a batch for the change it authorises, then commits
    both with the link marked used. Raises `LinkRefused` before yielding if the link does not
    work; if the block raises, nothing is committed and the link stays usable."""
    parts = _split(token)
    if parts is None:
        raise LinkRefused
    async for attempt in spool.guarded(link_lock_key(parts[0])):
        with attempt:
            link = check_link(spool, token, purposes, now)
            batch = WriteBatch()
            mark_link_used(batch, link, _millis(now))
            yield LinkRedemption(link, batch)
            await spool.commit(batch)
