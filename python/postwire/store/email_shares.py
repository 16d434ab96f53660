"""Links that show an email to anyone holding them (POST /emails/{id}/share).

Keys, in table "email_shares":

    link/<share_id>                        EmailShare   what a link's token names
    email/<team_id>/<email_id>/<share_id>  EmailShare   the email's links, to revoke them

A link opens while its record is there and until its expiry: revoking the email's links
(DELETE /emails/{id}/share) deletes their records, so a token already handed out stops working
at once in every process. Making a new link removes the email's expired ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from postwire import _core
from postwire.store.spool import Spool
from postwire.store.tables import Table

# An email's links read at most: far more than anyone shares one email.
MAX_SCAN: Final = 10_000


@dataclass(frozen=True, slots=True)
class EmailShare:
    id: str
    team_id: str
    email_id: str
    created_at_ms: int
    expires_at_ms: int


SHARES: Final = Table("email_shares", EmailShare)


def _link_key(share_id: str) -> str:
    return f"link/{share_id}"


def _email_prefix(team_id: str, email_id: str) -> str:
    return f"email/{team_id}/{email_id}/"


def _email_shares(spool: Spool, team_id: str, email_id: str) -> list[EmailShare]:
    rows = SHARES.scan(spool, prefix=_email_prefix(team_id, email_id), limit=MAX_SCAN)
    return [share for _, share in rows]


def _delete(batch: _core.WriteBatch, share: EmailShare) -> None:
    SHARES.delete(batch, _link_key(share.id))
    SHARES.delete(batch, _email_prefix(share.team_id, share.email_id) + share.id)


async def add_share(
    spool: Spool, team_id: str, email_id: str, now_ms: int, expires_at_ms: int
) -> EmailShare:
    share = EmailShare(_core.new_id(), team_id, email_id, now_ms, expires_at_ms)
    batch = _core.WriteBatch()
    for old in _email_shares(spool, team_id, email_id):
        if old.expires_at_ms <= now_ms:
            _delete(batch, old)
    SHARES.insert(batch, _link_key(share.id), share)
    SHARES.put(batch, _email_prefix(team_id, email_id) + share.id, share)
    await spool.commit(batch)
    return share


def open_share(spool: Spool, share_id: str, now_ms: int) -> EmailShare | None:
    """The link's record while it is neither revoked nor expired."""
    share = SHARES.get(spool, _link_key(share_id))
    return share if share is not None and share.expires_at_ms > now_ms else None


async def revoke_shares(spool: Spool, team_id: str, email_id: str) -> int:
    """Delete every link of the email; how many there were."""
    shares = _email_shares(spool, team_id, email_id)
    if shares:
        batch = _core.WriteBatch()
        for share in shares:
            _delete(batch, share)
        await spool.commit(batch)
    return len(shares)
