"""A team's single sign-on settings and the logins waiting for an identity provider's answer.

`sso_configs` holds, under `team/{team}`, how the team's people sign in (OpenID Connect or
SAML 2.0, and whether password login is refused), and under `domain/{email domain}` which
team answers for addresses of that domain on the "Sign in with SSO" page (one team a domain:
the index is written with `insert`).

`sso_logins` holds each login sent to a provider, under the SHA-256 of its `state` (OAuth and
OpenID Connect) or of its AuthnRequest id (SAML), until the provider's answer consumes it or
it expires. Only hashes of the state and of the browser's binding cookie are kept, so a copy
of the table cannot finish anyone's login.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table


def _no_domains() -> list[str]:
    return []


@dataclass(frozen=True, slots=True)
class SsoConfigRecord:
    team_id: str
    # "oidc", "saml", or "" (none configured yet).
    protocol: str = ""
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    # Needed in clear to call the token endpoint; shown to no one once saved.
    oidc_client_secret: str = ""
    saml_metadata_xml: str = ""
    saml_metadata_url: str = ""
    # Password login is refused for the team's members (owners keep it: break-glass).
    enforce: bool = False
    # Email domains whose addresses the SSO page sends to this team's provider.
    email_domains: list[str] = field(default_factory=_no_domains)
    updated_at: str = ""


@dataclass(frozen=True, slots=True)
class SsoDomainRecord:
    team_id: str


@dataclass(frozen=True, slots=True)
class PendingLoginRecord:
    # "google", "github", "oidc" (a team's provider) or "saml".
    provider: str
    team_id: str | None
    nonce: str
    code_verifier: str
    next_url: str
    # SHA-256 of the pre-login cookie of the browser that started the login.
    browser_sha256: str
    redirect_uri: str
    created_at: str
    # ISO 8601 UTC; a login older than this is refused.
    expires_at: str
    # Set when a signed-in user links the team's provider to their account: the user's id.
    link_user_id: str = ""


SSO_CONFIGS = Table("sso_configs", SsoConfigRecord)
SSO_DOMAINS = Table("sso_configs", SsoDomainRecord)
PENDING_LOGINS = Table("sso_logins", PendingLoginRecord)


def secret_sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _config_key(team_id: str) -> str:
    return f"team/{team_id}"


def _domain_key(domain: str) -> str:
    return f"domain/{domain.lower()}"


def _pending_key(handle: str) -> str:
    return f"pending/{secret_sha256(handle)}"


def get_sso_config(spool: Spool, team_id: str) -> SsoConfigRecord | None:
    return SSO_CONFIGS.get(spool, _config_key(team_id))


async def get_sso_config_parked(spool: Spool, team_id: str) -> SsoConfigRecord | None:
    """`get_sso_config`, parked rather than blocking on a table store on the network."""
    return await SSO_CONFIGS.aget(spool, _config_key(team_id))


def put_sso_config(
    batch: WriteBatch, record: SsoConfigRecord, previous: SsoConfigRecord | None
) -> None:
    """Save the team's settings and move its email-domain index entries with them; a domain
    another team already claims fails the batch with `KeyExistsError`."""
    SSO_CONFIGS.put(batch, _config_key(record.team_id), record)
    old = set(previous.email_domains) if previous is not None else set()
    new = set(record.email_domains)
    for domain in sorted(old - new):
        batch.delete("sso_configs", _domain_key(domain).encode())
    for domain in sorted(new - old):
        SSO_DOMAINS.insert(batch, _domain_key(domain), SsoDomainRecord(team_id=record.team_id))


def team_for_email_domain(spool: Spool, domain: str) -> str | None:
    entry = SSO_DOMAINS.get(spool, _domain_key(domain))
    return None if entry is None else entry.team_id


def put_pending_login(batch: WriteBatch, handle: str, record: PendingLoginRecord) -> None:
    """Keep a login under its `handle` (the state or SAML request id), which must be new."""
    key = _pending_key(handle)
    PENDING_LOGINS.insert(batch, key, record)
    EXPIRIES.put(batch, _expiry_key(record.expires_at, key), ExpiryEntry(key))


async def save_pending_login(
    spool: Spool, handle: str, record: PendingLoginRecord, *, now: str
) -> None:
    """Keep a new login, and remove some logins abandoned before `now` (ISO 8601) with it,
    so that started and never finished sign-ins do not pile up."""
    batch = WriteBatch()
    prune_expired(spool, batch, now)
    put_pending_login(batch, handle, record)
    await spool.commit(batch)


def get_pending_login(spool: Spool, handle: str) -> PendingLoginRecord | None:
    return PENDING_LOGINS.get(spool, _pending_key(handle))


async def take_pending_login(spool: Spool, handle: str) -> PendingLoginRecord | None:
    """The login kept under `handle`, removed in the same step: a second answer carrying the
    same state (a replayed callback, and with it a replayed nonce) finds nothing."""
    found: PendingLoginRecord | None = await _take(spool, PENDING_LOGINS, _pending_key(handle))
    return found


@dataclass(frozen=True, slots=True)
class ExpiryEntry:
    """`expiry/{expires_at}/{key}`: a login record's key, in the order they expire."""

    key: str


EXPIRIES = Table("sso_logins", ExpiryEntry)
# Abandoned logins removed with each new one: more than are started, so they never pile up.
PRUNED_PER_LOGIN = 8


def _expiry_key(expires_at: str, key: str) -> str:
    return f"expiry/{expires_at}/{key}"


def prune_expired(spool: Spool, batch: WriteBatch, now: str) -> None:
    for entry_key, entry in EXPIRIES.scan(spool, prefix="expiry/", limit=PRUNED_PER_LOGIN):
        if entry_key[len("expiry/") :] >= now:
            break
        batch.delete("sso_logins", entry.key.encode())
        EXPIRIES.delete(batch, entry_key)


class _Expiring(Protocol):
    @property
    def expires_at(self) -> str: ...


async def _take(spool: Spool, table: Table[Any], key: str) -> Any:
    async for attempt in spool.guarded(f"{table.name}/{key}"):
        with attempt:
            record: _Expiring | None = table.get(spool, key)
            if record is None:
                return None
            batch = WriteBatch()
            table.delete(batch, key)
            EXPIRIES.delete(batch, _expiry_key(record.expires_at, key))
            await spool.commit(batch)
            return record


@dataclass(frozen=True, slots=True)
class ProvenLoginRecord:
    """A SAML identity proven at the assertion consumer, waiting for the browser that started
    the login to fetch it (the consumer's POST arrives cross-site, without that browser's
    SameSite=Lax cookies, so the binding is checked on the next, top-level, request)."""

    team_id: str
    email: str
    name: str
    next_url: str
    browser_sha256: str
    expires_at: str
    subject: str = ""
    issuer: str = ""
    link_user_id: str = ""


PROVEN_LOGINS = Table("sso_logins", ProvenLoginRecord)


def _proven_key(ticket: str) -> str:
    return f"proven/{secret_sha256(ticket)}"


async def save_proven_login(spool: Spool, ticket: str, record: ProvenLoginRecord) -> None:
    key = _proven_key(ticket)
    batch = WriteBatch()
    PROVEN_LOGINS.insert(batch, key, record)
    EXPIRIES.put(batch, _expiry_key(record.expires_at, key), ExpiryEntry(key))
    await spool.commit(batch)


async def take_proven_login(spool: Spool, ticket: str) -> ProvenLoginRecord | None:
    found: ProvenLoginRecord | None = await _take(spool, PROVEN_LOGINS, _proven_key(ticket))
    return found
