"""Which account a team's identity provider speaks for: `(team, issuer, subject) -> user`.

Kept in the `sso_configs` table beside the team's settings:
    identity/{team_id}/{sha256 of issuer and subject}  -> SsoIdentityRecord
    identity-of/{user_id}/{team_id}/{same hash}        -> SsoIdentityRecord (a user's links)

The issuer is the OpenID Connect `iss` (or, for SAML, the IdP's entity id) and the subject its
`sub` (the SAML NameID). Both are hashed into the key: issuers are URLs, subjects are any text.
A link is written with `insert`, so two first sign-ins of one identity cannot make two links.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

# A user's links read at most for the Account page (one a team, in practice).
MAX_LINKS_OF_USER: Final = 1000


@dataclass(frozen=True, slots=True)
class SsoIdentityRecord:
    team_id: str
    issuer: str
    subject: str
    user_id: str
    # The address the provider gave when the link was made (shown on the Account page).
    email: str
    created_at: str


SSO_IDENTITIES: Final = Table("sso_configs", SsoIdentityRecord)


def _identity_hash(issuer: str, subject: str) -> str:
    return hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()


def _identity_key(team_id: str, issuer: str, subject: str) -> str:
    return f"identity/{team_id}/{_identity_hash(issuer, subject)}"


def _user_key(record: SsoIdentityRecord) -> str:
    identity = _identity_hash(record.issuer, record.subject)
    return f"identity-of/{record.user_id}/{record.team_id}/{identity}"


def get_sso_identity(
    spool: Spool, team_id: str, issuer: str, subject: str
) -> SsoIdentityRecord | None:
    return SSO_IDENTITIES.get(spool, _identity_key(team_id, issuer, subject))


def insert_sso_identity(batch: WriteBatch, record: SsoIdentityRecord) -> None:
    """Link the identity to its user; the batch fails with `KeyExistsError` if it is linked."""
    key = _identity_key(record.team_id, record.issuer, record.subject)
    SSO_IDENTITIES.insert(batch, key, record)
    SSO_IDENTITIES.put(batch, _user_key(record), record)


def delete_sso_identity(batch: WriteBatch, record: SsoIdentityRecord) -> None:
    SSO_IDENTITIES.delete(batch, _identity_key(record.team_id, record.issuer, record.subject))
    SSO_IDENTITIES.delete(batch, _user_key(record))


def sso_identities_of_user(spool: Spool, user_id: str) -> list[SsoIdentityRecord]:
    rows = SSO_IDENTITIES.scan(spool, prefix=f"identity-of/{user_id}/", limit=MAX_LINKS_OF_USER)
    return [record for _, record in rows]


async def sso_identities_of_user_parked(spool: Spool, user_id: str) -> list[SsoIdentityRecord]:
    """`sso_identities_of_user`, parked rather than blocking on a table store on the network."""
    prefix = f"identity-of/{user_id}/"
    rows = await SSO_IDENTITIES.ascan(spool, prefix=prefix, limit=MAX_LINKS_OF_USER)
    return [record for _, record in rows]
