"""Invitations to teams and single-use links (invitations, password resets, address checks).

`auth_links` holds three kinds of key:
- `link/{lookup}`: a link's record. A link's token is `{lookup}.{secret}`; only the secret's
  SHA-256 is kept, so the table cannot be turned back into working links.
- `expiry/{expires_at_ms:015d}/{lookup}`: the same links by expiry, so that issuing a link
  deletes a few expired ones and the table holds little more than the live links.
- `rate/{window}/{what}`: how many links were asked for in a 15-minute window (password
  resets per address and per client), pruned the same way.

`invitations` holds a team's pending invitations under `{team}/{id}` (ids are UUID v7, so they
list oldest first) and `pending/{team}/{email}`: the one pending invitation of an address.

`counters` holds the invitations made in each hour, per team and per invited address (hashed):
`invitations/{window}/team/{team}` and `invitations/{window}/to/{sha256}` (`WriteBatch.add_counter`)
and, beside each, `.../{n}` inserted by the n-th invitation (`claim_invitation`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Final, Literal

from postwire._core import WriteBatch
from postwire.errors import KeyExistsError
from postwire.store.metric_counters import COUNTERS_TABLE
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import TeamRecords, team_prefix

RATE_WINDOW_MS: Final = 15 * 60 * 1000
# Expired entries deleted with each link issued or request counted: more than each adds.
_PRUNED_PER_WRITE: Final = 16
# A team's pending invitations listed at most.
MAX_PENDING_LISTED: Final = 1_000
INVITATION_WINDOW_MS: Final = 3600 * 1000
_INVITATION_COUNTS: Final = "invitations/"


@dataclass(frozen=True, slots=True)
class AuthLinkRecord:
    lookup: str
    secret_sha256: str
    purpose: str  # accounts.links.LinkPurpose
    email: str
    user_id: str | None
    team_id: str | None
    invitation_id: str | None
    created_at_ms: int
    expires_at_ms: int
    used_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class LinkExpiry:
    lookup: str


@dataclass(frozen=True, slots=True)
class RequestCount:
    count: int


@dataclass(frozen=True, slots=True)
class InvitationRecord:
    id: str
    team_id: str
    email: str  # lower case
    role: str  # "owner" | "admin" | "member"
    invited_by: str | None  # the inviting user's id
    link_lookup: str
    created_at: str  # store.accounts.contract_timestamp
    expires_at_ms: int


@dataclass(frozen=True, slots=True)
class PendingInvitation:
    invitation_id: str


AUTH_LINKS: Final = Table("auth_links", AuthLinkRecord)
LINK_EXPIRIES: Final = Table("auth_links", LinkExpiry)
REQUEST_COUNTS: Final = Table("auth_links", RequestCount)
INVITATIONS: Final = Table("invitations", InvitationRecord)
PENDING_BY_EMAIL: Final = Table("invitations", PendingInvitation)
_INVITATIONS: TeamRecords[InvitationRecord] = TeamRecords(INVITATIONS)


def _link_key(lookup: str) -> str:
    return f"link/{lookup}"


def _expiry_key(expires_at_ms: int, lookup: str) -> str:
    return f"expiry/{expires_at_ms:015d}/{lookup}"


def _pending_key(team_id: str, email: str) -> str:
    return f"pending/{team_id}/{email}"


def get_link(spool: Spool, lookup: str) -> AuthLinkRecord | None:
    return AUTH_LINKS.get(spool, _link_key(lookup))


def link_lock_key(lookup: str) -> str:
    """The key to hold (`Spool.guarded`) while a link is checked and used."""
    return f"auth_links/{_link_key(lookup)}"


def add_link(spool: Spool, batch: WriteBatch, link: AuthLinkRecord, now_ms: int) -> None:
    """Write a new link and its expiry entry, and delete a few links that expired."""
    AUTH_LINKS.insert(batch, _link_key(link.lookup), link)
    LINK_EXPIRIES.put(batch, _expiry_key(link.expires_at_ms, link.lookup), LinkExpiry(link.lookup))
    current = f"expiry/{now_ms:015d}"
    for key, expiry in LINK_EXPIRIES.scan(spool, prefix="expiry/", limit=_PRUNED_PER_WRITE):
        if key >= current:
            break
        LINK_EXPIRIES.delete(batch, key)
        AUTH_LINKS.delete(batch, _link_key(expiry.lookup))


def mark_link_used(batch: WriteBatch, link: AuthLinkRecord, now_ms: int) -> None:
    AUTH_LINKS.put(batch, _link_key(link.lookup), replace(link, used_at_ms=now_ms))


def delete_link(batch: WriteBatch, link: AuthLinkRecord) -> None:
    AUTH_LINKS.delete(batch, _link_key(link.lookup))
    LINK_EXPIRIES.delete(batch, _expiry_key(link.expires_at_ms, link.lookup))


def _window(now_ms: int) -> str:
    return f"{now_ms - now_ms % RATE_WINDOW_MS:015d}"


def count_requests(spool: Spool, what: str, now_ms: int) -> int:
    """Requests counted for `what` (an address, a client) in the current 15-minute window."""
    count = REQUEST_COUNTS.get(spool, f"rate/{_window(now_ms)}/{what}")
    return 0 if count is None else count.count


async def record_request(spool: Spool, whats: list[str], now_ms: int) -> None:
    """Count one request for each of `whats` and delete a few counts of past windows."""
    window = _window(now_ms)
    keys = [f"rate/{window}/{what}" for what in whats]
    async for attempt in spool.guarded(keys):
        with attempt:
            batch = WriteBatch()
            for key in keys:
                count = REQUEST_COUNTS.get(spool, key)
                REQUEST_COUNTS.put(
                    batch, key, RequestCount(1 if count is None else count.count + 1)
                )
            for key, _ in REQUEST_COUNTS.scan(spool, prefix="rate/", limit=_PRUNED_PER_WRITE):
                if key >= f"rate/{window}":
                    break
                REQUEST_COUNTS.delete(batch, key)
            await spool.commit(batch)


@dataclass(frozen=True, slots=True)
class InvitationRefused:
    """The limit an invitation met, and when its hour ends (wall-clock ms)."""

    limit: Literal["team", "address"]
    window_end_ms: int


async def claim_invitation(
    spool: Spool, team_id: str, email: str, now_ms: int, *, per_team: int, per_address: int
) -> InvitationRefused | None:
    """Count one invitation of `team_id` to `email` (normalized) in the current hour, or refuse
    it (counting nothing) when the team or the address has used up its hour.

    The n-th invitation of an hour inserts the key of its number beside each count, in the
    commit that adds to the counts: two invitations that read the same count cannot both
    commit, in one process or several; the one that loses reads again. So no burst gets more
    than the limits through, and none is refused while the hour has room."""
    start = now_ms - now_ms % INVITATION_WINDOW_MS
    window = f"{_INVITATION_COUNTS}{start:015d}/"
    address = hashlib.sha256(email.encode()).hexdigest()  # the table keeps no addresses
    counts: dict[bytes, tuple[Literal["team", "address"], int]] = {
        f"{window}team/{team_id}".encode(): ("team", per_team),
        f"{window}to/{address}".encode(): ("address", per_address),
    }
    while True:
        batch = WriteBatch()
        for key, (limit, allowed) in counts.items():
            counted = spool.counter(COUNTERS_TABLE, key)
            if counted >= allowed:
                return InvitationRefused(limit, start + INVITATION_WINDOW_MS)
            batch.insert(COUNTERS_TABLE, key + b"/%06d" % (counted + 1), b"1")
            batch.add_counter(COUNTERS_TABLE, key, 1)
        prefix = _INVITATION_COUNTS.encode()
        for key, _ in spool.scan(COUNTERS_TABLE, prefix=prefix, limit=_PRUNED_PER_WRITE):
            if key >= window.encode():
                break
            batch.delete(COUNTERS_TABLE, key)
        try:
            await spool.commit(batch)
        except KeyExistsError:
            continue  # another invitation took that number: its count is committed now
        return None


def get_invitation(spool: Spool, team_id: str, invitation_id: str) -> InvitationRecord | None:
    return _INVITATIONS.get(spool, team_id, invitation_id)


def pending_invitation_for(spool: Spool, team_id: str, email: str) -> InvitationRecord | None:
    entry = PENDING_BY_EMAIL.get(spool, _pending_key(team_id, email))
    return None if entry is None else get_invitation(spool, team_id, entry.invitation_id)


def pending_invitations(spool: Spool, team_id: str) -> list[InvitationRecord]:
    """The team's pending invitations (expired ones included), oldest first."""
    rows = INVITATIONS.scan(spool, prefix=team_prefix(team_id), limit=MAX_PENDING_LISTED)
    return [invitation for _, invitation in rows]


async def pending_invitations_parked(spool: Spool, team_id: str) -> list[InvitationRecord]:
    """`pending_invitations`, parked rather than blocking on a table store on the network."""
    rows = await INVITATIONS.ascan(spool, prefix=team_prefix(team_id), limit=MAX_PENDING_LISTED)
    return [invitation for _, invitation in rows]


def put_invitation(batch: WriteBatch, invitation: InvitationRecord) -> None:
    _INVITATIONS.put(batch, invitation)
    entry = PendingInvitation(invitation.id)
    PENDING_BY_EMAIL.put(batch, _pending_key(invitation.team_id, invitation.email), entry)


def delete_invitation(batch: WriteBatch, invitation: InvitationRecord) -> None:
    _INVITATIONS.delete(batch, invitation)
    PENDING_BY_EMAIL.delete(batch, _pending_key(invitation.team_id, invitation.email))
