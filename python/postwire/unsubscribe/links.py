"""Signed unsubscribe links: the token that names one contact of one broadcast, the URL and the
mailto address made from it, and the `List-Unsubscribe` header fields (RFC 2369, RFC 8058).

A token is URL-safe base64 (no padding) of

    team id (16 bytes) | broadcast id (16 bytes) | contact id (16 bytes) | tag (10 bytes)

78 characters. The tag is HMAC-SHA256 over the three ids, cut to 80 bits, under a secret of its
own kept in the spool's `meta` table (`UNSUBSCRIBE_SECRET`), so every process and restart checks
what any other made, and a link made for one contact, edited to name another (or another
team's), is refused. Nothing is stored per message: a broadcast to a million contacts costs one
HMAC per contact, its key and the broadcast's ids absorbed once (`BroadcastLinks`).

The mailto address is `unsub+<mailto token>@<return-path host>`: the same tag after the
broadcast and contact ids, without the team's 16 bytes (56 characters), so that the local part
stays within RFC 5321's 64 octets; the host, where Postwire receives mail, names the candidate
teams and the tag decides among them. The local part is case-sensitive, as RFC 5321 says every
local part is and as mailbox providers keep it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NamedTuple

from postwire.store.server_secrets import server_secret
from postwire.store.spool import Spool

UNSUBSCRIBE_SECRET: Final = "unsubscribe_secret"  # its name among the spool's secrets
TAG_BYTES: Final = 10  # 80 bits
ID_BYTES: Final = 16
TOKEN_LENGTH: Final = 78  # characters of 3 * 16 + 10 bytes
MAILTO_TOKEN_LENGTH: Final = 56  # characters of 2 * 16 + 10 bytes
MAILTO_PREFIX: Final = "unsub+"
URL_PATH: Final = "/u/"
ONE_CLICK: Final = "List-Unsubscribe=One-Click"  # RFC 8058's body and header value

_TOKEN_TEXT: Final = re.compile(r"[A-Za-z0-9_-]+")


class UnsubscribeTarget(NamedTuple):
    """What a token names: one contact, reached by one broadcast of one team."""

    team_id: str
    contact_id: str
    broadcast_id: str


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str, length: int) -> bytes | None:
    """The bytes of `text` if it is the one spelling of `length` characters of URL-safe base64
    (trailing bits unused, so an edited last character cannot name the same bytes)."""
    if len(text) != length or not _TOKEN_TEXT.fullmatch(text):
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return raw if _b64(raw) == text else None


def _tag(secret: bytes, team: bytes, broadcast: bytes, contact: bytes) -> bytes:
    return hmac.new(secret, team + broadcast + contact, hashlib.sha256).digest()[:TAG_BYTES]


def _id_bytes(resource_id: str) -> bytes:
    """A UUID's 16 bytes (a fifth of the time `uuid.UUID` takes, which counts per contact)."""
    raw = bytes.fromhex(resource_id.replace("-", ""))
    if len(raw) != ID_BYTES:
        raise ValueError(f"not an id: {resource_id!r}")
    return raw


def _id_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


def make_token(secret: bytes, team_id: str, contact_id: str, broadcast_id: str) -> str:
    """The token of `contact_id` reached by `broadcast_id` of `team_id`."""
    team, broadcast, contact = map(_id_bytes, (team_id, broadcast_id, contact_id))
    return _b64(team + broadcast + contact + _tag(secret, team, broadcast, contact))


def parse_token(secret: bytes, token: str) -> UnsubscribeTarget | None:
    """What `token` names, if Postwire made it under `secret`; None for anything else (forged,
    edited, truncated, another spelling). The tag is compared in constant time."""
    raw = _unb64(token, TOKEN_LENGTH)
    if raw is None:
        return None
    team, broadcast, contact, tag = raw[:16], raw[16:32], raw[32:48], raw[48:]
    if not hmac.compare_digest(tag, _tag(secret, team, broadcast, contact)):
        return None
    return UnsubscribeTarget(_id_text(team), _id_text(contact), _id_text(broadcast))


def mailto_token(token: str) -> str:
    """The mailto form of a (well-formed) `token`: the same without the team's bytes."""
    raw = _unb64(token, TOKEN_LENGTH)
    if raw is None:
        raise ValueError("not an unsubscribe token")
    return _b64(raw[ID_BYTES:])


def parse_mailto_token(
    secret: bytes, token: str, team_ids: Iterable[str]
) -> UnsubscribeTarget | None:
    """What the mailto `token` names, for the first of `team_ids` (the teams whose domains use
    the host it was sent to) whose tag it carries; None if none."""
    raw = _unb64(token, MAILTO_TOKEN_LENGTH)
    if raw is None:
        return None
    broadcast, contact, tag = raw[:16], raw[16:32], raw[32:]
    for team_id in team_ids:
        if hmac.compare_digest(tag, _tag(secret, _id_bytes(team_id), broadcast, contact)):
            return UnsubscribeTarget(team_id, _id_text(contact), _id_text(broadcast))
    return None


def unsubscribe_url(public_url: str, token: str) -> str:
    """Where the recipient unsubscribes: the hosted page (GET) and the one-click POST."""
    return f"{public_url.rstrip('/')}{URL_PATH}{token}"


def unsubscribe_mailto(token: str, return_path_host: str) -> str:
    """The address that unsubscribes whoever writes to it (`token` in its URL form)."""
    return f"{MAILTO_PREFIX}{mailto_token(token)}@{return_path_host.lower()}"


def parse_mailto_address(address: str) -> tuple[str, str] | None:
    """(mailto token, host in lower case) of an address shaped like an unsubscribe address, its
    token unchecked; None for any other address."""
    local, at, host = address.strip().strip("<>").rpartition("@")
    if not at or local[: len(MAILTO_PREFIX)].lower() != MAILTO_PREFIX:
        return None
    token = local[len(MAILTO_PREFIX) :]
    if len(token) != MAILTO_TOKEN_LENGTH or not _TOKEN_TEXT.fullmatch(token):
        return None
    return token, host.lower().rstrip(".")


def list_unsubscribe_headers(url: str, mailto: str | None) -> list[tuple[str, str]]:
    """`List-Unsubscribe` (the URL first, then the mailto address) and RFC 8058's
    `List-Unsubscribe-Post`, which tells mailbox providers the URL takes a one-click POST."""
    targets = f"<{url}>" if mailto is None else f"<{url}>, <mailto:{mailto}>"
    return [("List-Unsubscribe", targets), ("List-Unsubscribe-Post", ONE_CLICK)]


@dataclass(frozen=True, slots=True)
class ContactLinks:
    """One recipient's unsubscribe URL, mailto address and header fields."""

    url: str
    mailto: str | None
    headers: list[tuple[str, str]]


class BroadcastLinks:
    """Makes the links of every contact of one broadcast: the HMAC key and the broadcast's ids
    are absorbed once, so each contact costs one HMAC over its own 16 bytes."""

    def __init__(
        self,
        secret: bytes,
        public_url: str,
        team_id: str,
        broadcast_id: str,
        return_path_host: str | None,
    ) -> None:
        self._team = _id_bytes(team_id)
        self._broadcast = _id_bytes(broadcast_id)
        self._mac = hmac.new(secret, self._team + self._broadcast, hashlib.sha256)
        self._url_base = f"{public_url.rstrip('/')}{URL_PATH}"
        self._mailto_host = None if return_path_host is None else return_path_host.lower()

    def token(self, contact_id: str) -> str:
        contact = _id_bytes(contact_id)
        mac = self._mac.copy()
        mac.update(contact)
        return _b64(self._team + self._broadcast + contact + mac.digest()[:TAG_BYTES])

    def for_contact(self, contact_id: str) -> ContactLinks:
        contact = _id_bytes(contact_id)
        mac = self._mac.copy()
        mac.update(contact)
        signed = self._broadcast + contact + mac.digest()[:TAG_BYTES]
        url = self._url_base + _b64(self._team + signed)
        if self._mailto_host is None:
            return ContactLinks(url, None, list_unsubscribe_headers(url, None))
        mailto = f"{MAILTO_PREFIX}{_b64(signed)}@{self._mailto_host}"
        return ContactLinks(url, mailto, list_unsubscribe_headers(url, mailto))


async def load_unsubscribe_secret(spool: Spool) -> bytes:
    """The spool's unsubscribe secret, made on first use (the same in every process)."""
    return await server_secret(spool, UNSUBSCRIBE_SECRET)
