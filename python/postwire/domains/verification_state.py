"""Where a domain's verification stands, and the name it takes by it.

`start_verification` begins (or begins again) a domain's verification window;
`record_check_results` applies a DNS check's results. Adding a domain claims no name
(`domains.store`): the first domain of any team to become verified takes it, inserting
`verified/<name>` in the commit that makes it verified, so two verifying at once cannot both win.
Every other team's domain of that name is then `failed`, with a `failure_reason` and a
`domain.updated` webhook event (`drop_other_claims`), and stays failed whatever it asks. Any
change of a domain's status adds a `domain.updated` event in the commit that makes it. A name
changes hands otherwise only through a claim proven in DNS (`take_over_name`, for
`domains.claims`).

Finding the other teams' domains of a name reads every domain: this is the rare event of a
name changing hands, not worth an index of names across teams. A domain missed there (the
service stopped in between) is failed by its own next check, which finds the name taken.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from postwire import _core
from postwire.domains.records import RecordCheck, domain_status, statuses_after_checks
from postwire.domains.store import (
    DOMAIN_OWNERS,
    DOMAINS,
    DomainOwner,
    DomainRecord,
    domain_dns_records,
    domain_key,
    domain_lock_key,
    get_domain,
    guarded_domain,
    index_owners,
    load_domain,
    owner_key,
    record_statuses,
    scan_all_domains,
    to_json,
    verified_owner,
)
from postwire.errors import KeyExistsError
from postwire.store.deliveries import add_event
from postwire.store.guards import never_after_change

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.store.guards import Attempt
    from postwire.store.spool import Spool

log = logging.getLogger("postwire.domains")

# The `data` of domain.* webhooks (contract section 8.2), `capabilities` for the Rust SDK.
DOMAIN_EVENT_KEYS: Final = (
    "id", "name", "status", "created_at", "region", "records", "capabilities", "failure_reason"
)  # fmt: skip


async def start_verification(
    spool: Spool, config: Config, team_id: str, domain_id: str
) -> DomainRecord:
    """Start (or restart) the domain's verification now: its policy window begins again.

    Records never checked become `pending`; a record already verified stays so until a check
    says otherwise. The DNS check itself is the verifier's (`DomainVerifier`).
    """
    async for attempt in guarded_domain(spool, team_id, domain_id):
        with attempt:
            domain = get_domain(spool, team_id, domain_id)
            records = domain_dns_records(domain, config)
            statuses = record_statuses(domain)
            for record in records:
                if statuses.get(record.key, "not_started") == "not_started":
                    statuses[record.key] = "pending"
            updated = dataclasses.replace(
                domain,
                record_statuses=dict(statuses),
                status=domain_status(records, statuses),
                verification_started_at_ms=spool.clock_ms(),
            )
            if verified_owner(spool, domain.name) not in (None, DomainOwner(team_id, domain_id)):
                updated = _dropped(updated)  # asking again changes nothing: the name is taken
            batch = _core.WriteBatch()
            DOMAINS.put(batch, domain_key(team_id, domain_id), updated)
            await spool.commit(batch)
            return updated
    never_after_change()


async def record_check_results(
    spool: Spool, config: Config, team_id: str, domain_id: str, checks: Sequence[RecordCheck]
) -> DomainRecord | None:
    """Apply a DNS check's results to the domain as it is now, in one commit.

    The policy (`next_record_status`) runs against the stored statuses and window, read under
    the domain's lock, so an API change made while DNS was being asked is kept. A domain that
    becomes verified takes its name (`verified/<name>`) in the same commit; if another team
    took it first, the domain is `failed` with a `failure_reason` whatever DNS says. A change
    of status adds a `domain.updated` webhook event. None if the domain was deleted meanwhile
    or its verification was never started.
    """
    async for attempt in guarded_domain(spool, team_id, domain_id):
        with attempt:
            domain = load_domain(spool, team_id, domain_id)
            if domain is None or domain.verification_started_at_ms is None:
                return None
            now_ms = spool.clock_ms()
            statuses = statuses_after_checks(
                record_statuses(domain),
                checks,
                verification_started_at_ms=domain.verification_started_at_ms,
                now_ms=now_ms,
            )
            checked = dataclasses.replace(
                domain,
                record_statuses=dict(statuses),
                record_details={
                    **domain.record_details,
                    **{check.record.key: check.detail for check in checks},
                },
                status=domain_status(domain_dns_records(domain, config), statuses),
                last_checked_at_ms=now_ms,
                failure_reason=None,
            )
            mine = DomainOwner(team_id, domain_id)
            while True:
                owner = verified_owner(spool, domain.name)
                updated = checked if owner in (None, mine) else _dropped(checked)
                batch = _core.WriteBatch()
                if owner is None and updated.status == "verified":
                    index_owners(spool, batch)
                    DOMAIN_OWNERS.insert(batch, owner_key(domain.name), mine)
                _put_with_event(batch, domain, updated, config, now_ms)
                try:
                    await spool.commit(batch)
                except KeyExistsError:
                    continue  # another team verified the name meanwhile: read who
                return updated
    never_after_change()


async def drop_claim(spool: Spool, config: Config, team_id: str, domain_id: str) -> bool:
    """Mark the team's domain `failed` if another team has verified its name; whether it was
    changed now (it was not if it is gone, its own team's, or marked already)."""
    async for attempt in guarded_domain(spool, team_id, domain_id):
        with attempt:
            domain = load_domain(spool, team_id, domain_id)
            if domain is None or verified_owner(spool, domain.name) in (
                None,
                DomainOwner(team_id, domain_id),
            ):
                return False
            dropped = _dropped(domain)
            if dropped == domain:
                return False
            batch = _core.WriteBatch()
            _put_with_event(batch, domain, dropped, config, spool.clock_ms())
            await spool.commit(batch)
            return True
    never_after_change()


def _dropped(domain: DomainRecord) -> DomainRecord:
    reason = (
        f"Another team verified {domain.name} first: this domain cannot be verified or send "
        "mail. Delete it, or ask the other team to delete theirs and verify it again."
    )
    return dataclasses.replace(domain, status="failed", failure_reason=reason)


def _put_with_event(
    batch: _core.WriteBatch,
    before: DomainRecord,
    after: DomainRecord,
    config: Config,
    now_ms: int,
) -> None:
    """Write `after` over `before`, with a `domain.updated` event if its status changed."""
    DOMAINS.put(batch, domain_key(after.team_id, after.id), after)
    if (before.status, before.failure_reason) == (after.status, after.failure_reason):
        return
    shown = to_json(after, config)
    data: dict[str, Any] = {key: shown[key] for key in DOMAIN_EVENT_KEYS if key in shown}
    add_event(batch, after.team_id, after.id, "domain.updated", now_ms, **data)


async def drop_other_claims(spool: Spool, config: Config, winner: DomainRecord) -> int:
    """Fail every other team's domain named like `winner`; the number failed now."""
    others = [
        domain
        for domain in scan_all_domains(spool)
        if domain.name == winner.name and domain.team_id != winner.team_id
    ]
    dropped = 0
    for domain in others:
        if await drop_claim(spool, config, domain.team_id, domain.id):
            dropped += 1
            log.info("domain %s: verified by another team, this team's claim dropped", domain.name)
    return dropped


def name_lock_key(name: str) -> str:
    """The guard a change of `name`'s owner holds (`Spool.guarded`)."""
    return f"domains/{owner_key(name)}"


async def holding_name(
    spool: Spool, name: str, *keys: str
) -> AsyncIterator[tuple[Attempt, DomainOwner | None]]:
    """Attempts of a guarded change of `name`'s owner, of the domain that owns it and of `keys`
    (`Spool.guarded`), each with that owner: `async for attempt, owner in holding_name(...):
    with attempt: ...`. Cleanup is the attempt's: the caller's `with attempt` ends it."""
    while True:
        owner = verified_owner(spool, name)
        guarded = [*keys, name_lock_key(name)]
        if owner is not None:
            guarded.append(domain_lock_key(owner.team_id, owner.domain_id))
        async for attempt in spool.guarded(guarded):
            if verified_owner(spool, name) != owner:
                # Verified by another domain meanwhile: guard that one instead.
                attempt.__exit__(None, None, None)
                break
            yield attempt, owner
        else:
            return


async def take_over_name(
    spool: Spool,
    config: Config,
    claimer: DomainOwner,
    name: str,
    previous: DomainOwner | None,
    batch: _core.WriteBatch,
) -> DomainOwner | None:
    """Make the claimer's domain the owner of `name` (a claim proven in DNS), in one commit,
    from `previous`; the owner it took the name from, if any. The caller holds
    `holding_name(name)`, which yielded `previous`, so two claims of one name, in any
    processes, never both read the old owner, and the old owner's domain does not change
    meanwhile.

    The previous owner's domain becomes `failed`, with a `failure_reason` and a
    `domain.updated` event, and stays so: its own checks now find the name taken. It keeps its
    DKIM key and the mail it accepted before (docs/api.md, "Domain claims").
    """
    if previous == claimer:
        previous = None
    index_owners(spool, batch)
    DOMAIN_OWNERS.put(batch, owner_key(name), claimer)
    if previous is not None:
        old = load_domain(spool, previous.team_id, previous.domain_id)
        if old is not None:
            reason = (
                f"Another team proved in DNS that it holds {name} and took it over: this "
                "domain cannot be verified or send mail any more. Delete it."
            )
            taken = dataclasses.replace(old, status="failed", failure_reason=reason)
            _put_with_event(batch, old, taken, config, spool.clock_ms())
    await spool.commit(batch)  # with whatever the caller added: the claim's completion
    if previous is not None:
        log.info("domain %s: taken over by a claim proven in DNS", name)
    return previous
