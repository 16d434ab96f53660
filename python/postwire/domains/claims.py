"""Domain claims: a team proves in DNS that it holds a name another team verified, and takes
the name over (`POST /domains/claim`, `GET /domains/{id}/claim`, `POST .../claim/verify`).

Starting a claim adds the name to the claiming team as a new domain of its own (the claim's
"placeholder": a fresh DKIM key, never the other team's), or uses the domain of that name the
team has already, and hands out a TXT record to publish at the name. Verifying looks that
record up at once: found, the claim is `completed` and the name changes hands
(`verification_state.take_over_name`); the placeholder is then verified like any domain, once
its own records are published. Not found, the claim stays `pending` until `CLAIM_DAYS` after it
began, then it is `expired`.

Keys, in table "domains": `claim/<team_id>/<domain_id>`  DomainClaim  the domain's latest claim.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import dns.exception
import dns.resolver

from postwire import _core
from postwire.domains.store import (
    DOMAIN_NAMES,
    DOMAINS,
    DomainNameEntry,
    DomainOwner,
    DomainRecord,
    domain_key,
    find_domain_by_name,
    format_timestamp,
    get_domain,
    name_key,
    new_domain_record,
    parse_new_domain,
    verified_owner,
)
from postwire.domains.verification_state import holding_name, take_over_name
from postwire.errors import ApiError, KeyExistsError, validation_error
from postwire.store.guards import never_after_change
from postwire.store.tables import Table

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.store.spool import Spool

CLAIM_DAYS: Final = 7
TXT_PREFIX: Final = "postwire-domain-verification="


class TxtResolver(Protocol):
    async def resolve(self, qname: str, rdtype: str) -> dns.resolver.Answer: ...


@dataclass(frozen=True, slots=True)
class DomainClaim:
    id: str
    team_id: str
    domain_id: str  # the claiming team's domain of the name
    name: str
    region: str
    token: str  # the TXT record's value, after TXT_PREFIX
    status: str  # "pending" | "completed" | "expired"
    created_at_ms: int
    expires_at_ms: int
    completed_at_ms: int | None = None
    # The team the name was taken from (none if no team held it any more).
    previous_team_id: str | None = None


CLAIMS: Final = Table("domains", DomainClaim)


def _claim_key(team_id: str, domain_id: str) -> str:
    return f"claim/{team_id}/{domain_id}"


def _not_held_by_another(name: str) -> ApiError:
    return validation_error(
        f"The `{name}` domain is not verified by another team: add it with POST /domains.",
        status=403,
    )


def current_status(claim: DomainClaim, now_ms: int) -> str:
    """The claim's status now: a pending claim past its expiry is `expired`."""
    if claim.status == "pending" and now_ms >= claim.expires_at_ms:
        return "expired"
    return claim.status


async def start_claim(
    spool: Spool, config: Config, team_id: str, body: Mapping[str, object]
) -> tuple[DomainClaim, bool]:
    """Start a claim of the name in `body`, verified by another team, for `team_id`; the claim
    and whether it is new (a pending claim of the team's domain of that name is answered as it
    is).

    `body` is that of `POST /domains`, checked alike (422 `validation_error`). 403
    `validation_error` when no other team holds the name (the team adds it instead).
    """
    values = parse_new_domain(body)
    canonical = values.name
    now_ms = spool.clock_ms()
    existing = find_domain_by_name(spool, team_id, canonical)
    if existing is not None:
        claim = CLAIMS.get(spool, _claim_key(team_id, existing.id))
        if claim is not None and current_status(claim, now_ms) == "pending":
            return claim, False
    owner = verified_owner(spool, canonical)
    if owner is None or owner.team_id == team_id:
        raise _not_held_by_another(canonical)
    batch = _core.WriteBatch()
    domain: DomainRecord | None = existing
    if domain is None:
        domain = await new_domain_record(spool, config, team_id, **dataclasses.asdict(values))
        DOMAIN_NAMES.insert(batch, name_key(team_id, canonical), DomainNameEntry(domain.id))
        DOMAINS.put(batch, domain_key(team_id, domain.id), domain)
    claim = DomainClaim(
        id=_core.new_id(),
        team_id=team_id,
        domain_id=domain.id,
        name=canonical,
        region=domain.region,
        token=secrets.token_hex(16),
        status="pending",
        created_at_ms=now_ms,
        expires_at_ms=now_ms + CLAIM_DAYS * 86_400_000,
    )
    CLAIMS.put(batch, _claim_key(team_id, domain.id), claim)
    try:
        await spool.commit(batch)
    except KeyExistsError:  # the team added the name meanwhile: its claim goes on that domain
        return await start_claim(spool, config, team_id, body)
    return claim, True


def get_claim(spool: Spool, team_id: str, domain_id: str) -> DomainClaim:
    """The latest claim of the team's domain; 404 `not_found` if it has none."""
    get_domain(spool, team_id, domain_id)  # another team's id: "Domain not found"
    claim = CLAIMS.get(spool, _claim_key(team_id, domain_id))
    if claim is None:
        raise ApiError(404, "not_found", "Domain claim not found")
    return claim


async def verify_claim(
    spool: Spool, config: Config, team_id: str, domain_id: str, resolver: TxtResolver
) -> DomainClaim:
    """Look the claim's TXT record up now; found, complete the claim and take the name over.
    A claim that is not pending is answered as it is."""
    claim = get_claim(spool, team_id, domain_id)
    now_ms = spool.clock_ms()
    status = current_status(claim, now_ms)
    if status != "pending":
        return dataclasses.replace(claim, status=status)
    if not await _txt_published(resolver, claim.name, TXT_PREFIX + claim.token):
        return claim
    async for attempt, owner in holding_name(spool, claim.name, _claim_key(team_id, domain_id)):
        with attempt:
            latest = CLAIMS.get(spool, _claim_key(team_id, domain_id))
            if latest != claim:  # completed, or replaced, by another request meanwhile
                return get_claim(spool, team_id, domain_id)
            claimer = DomainOwner(team_id, domain_id)
            previous = None if owner == claimer else owner
            completed = dataclasses.replace(
                claim,
                status="completed",
                completed_at_ms=spool.clock_ms(),
                previous_team_id=None if previous is None else previous.team_id,
            )
            batch = _core.WriteBatch()
            CLAIMS.put(batch, _claim_key(team_id, domain_id), completed)
            await take_over_name(spool, config, claimer, claim.name, owner, batch)
            return completed
    never_after_change()


async def _txt_published(resolver: TxtResolver, name: str, expected: str) -> bool:
    try:
        answer = await resolver.resolve(name, "TXT")
    except (dns.exception.DNSException, OSError):
        return False
    for rdata in answer:
        if b"".join(rdata.strings).decode("utf-8", "replace").strip() == expected:
            return True
    return False


def claim_json(claim: DomainClaim, now_ms: int) -> dict[str, object]:
    """The contract's `domain_claim` object (resend-node `domain-claim.ts`)."""
    return {
        "object": "domain_claim",
        "id": claim.id,
        "name": claim.name,
        "status": current_status(claim, now_ms),
        "domain_id": claim.domain_id,
        "region": claim.region,
        "record": {
            "type": "TXT",
            "name": claim.name,
            "value": TXT_PREFIX + claim.token,
            "ttl": "Auto",
        },
        "blocked_reason": None,
        "failure_reason": None,
        "created_at": format_timestamp(claim.created_at_ms),
        "expires_at": format_timestamp(claim.expires_at_ms),
    }
