"""Postwire's VERP return paths: `bounces+<email id>-<tag>@<return-path host>`.

The tag is a MAC: HMAC-SHA256, under the spool's VERP secret, of the email id and the
return-path host, cut to 80 bits and written in lower-case base32 (16 characters, so the local
part has 61 octets, within RFC 5321's 64; an MTA that lowercases local parts changes nothing).
Only Postwire can make the return path of an email, so a report sent to one, or quoting one, is
about mail Postwire sent under that domain; one with any other tag is refused before anything is
applied.

Emails accepted before return paths had tags left with `bounces+<email id>@<host>`. Those stay
valid for the email they were made for (its envelope sender must be exactly that address, which
no email made since has) until `delivery.max_age_hours` plus `LEGACY_MARGIN` after it was sent:
the last delivery attempt, then the time a remote relay may keep a message before it reports.
"""

from __future__ import annotations

import base64
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.store.emails import EmailRecord

VERP_SECRET: Final = "verp_secret"  # its name among the spool's secrets
TAG_BYTES: Final = 10  # 80 bits: 16 base32 characters
# Relays keep a message up to 5 days (Postfix, Sendmail; Exim 4) before they send its DSN.
LEGACY_MARGIN: Final = timedelta(days=7)

# Ids are lower-case UUID strings; matching the whole address strictly means a forged local
# part names no email at all.
_VERP: Final = re.compile(
    r"bounces\+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"(?:-([a-z2-7]{16}))?"
    r"@([a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ReturnPathKey:
    """What makes and checks return paths: the spool's VERP secret, and how long an untagged
    return path stays valid."""

    secret: bytes
    legacy_max_age: timedelta

    @classmethod
    def for_config(cls, secret: bytes, config: Config) -> ReturnPathKey:
        return cls(secret, timedelta(hours=config.delivery.max_age_hours) + LEGACY_MARGIN)


@dataclass(frozen=True, slots=True)
class VerpAddress:
    """A return path's parts, in lower case; `tag` None for an untagged (older) one."""

    email_id: str
    tag: str | None
    host: str

    @property
    def address(self) -> str:
        tag = "" if self.tag is None else f"-{self.tag}"
        return f"bounces+{self.email_id}{tag}@{self.host}"


def return_path_tag(secret: bytes, email_id: str, host: str) -> str:
    message = f"{email_id.lower()}@{host.lower()}".encode()
    digest = hmac.digest(secret, message, "sha256")[:TAG_BYTES]  # one-shot, in C
    return base64.b32encode(digest).decode("ascii").lower()


def verp_address(secret: bytes, email_id: str, host: str) -> str:
    """The return path of email `email_id` sent under return-path host `host`."""
    tag = return_path_tag(secret, email_id, host)
    return VerpAddress(email_id.lower(), tag, host.lower()).address


def parse_verp(address: str) -> VerpAddress | None:
    """`address` as one of our return paths, tagged or not (the tag unchecked), or None."""
    match = _VERP.fullmatch(address.strip().strip("<>"))
    if match is None:
        return None
    tag = None if match[2] is None else match[2].lower()
    return VerpAddress(match[1].lower(), tag, match[3].lower())


def tag_matches(secret: bytes, verp: VerpAddress) -> bool:
    """Whether `verp` carries the tag Postwire gives it (compared in constant time)."""
    if verp.tag is None:
        return False
    return hmac.compare_digest(verp.tag, return_path_tag(secret, verp.email_id, verp.host))


def legacy_return_path_alive(key: ReturnPathKey, record: EmailRecord, now_ms: int) -> bool:
    """Whether `record`'s untagged return path still takes reports: until the legacy age after
    the email was sent (created, or scheduled for later)."""
    sent = datetime.fromisoformat(record.created_at)
    if record.scheduled_at is not None:
        sent = max(sent, datetime.fromisoformat(record.scheduled_at))
    return now_ms < (sent + key.legacy_max_age).timestamp() * 1000
