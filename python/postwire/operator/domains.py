"""`postwire domains list|delete`: every team's domains from the shell, deleted through the
store function the API and the dashboard call (`domains.store.delete_domain`, which holds the
domain's guard, so the service's verifier cannot write a deleted domain back). A module of
its own: the domain store brings dnspython, which the other operator commands do without."""

from __future__ import annotations

from typing import Any

from postwire.config import Config
from postwire.domains import store as domain_store
from postwire.domains.records import parse_domain_name
from postwire.errors import ApiError, PostwireError
from postwire.operator.accounts import team_names
from postwire.operator.store_access import opened_spool
from postwire.store import accounts
from postwire.store.spool import Spool


async def list_domains(config: Config, limit: int, after: str | None) -> list[dict[str, Any]]:
    """A page of every team's domains, by team then age; `after` is the last domain id shown."""
    async with opened_spool(config) as spool:
        cursor = None
        if after is not None:
            found = _domains_named(spool, after, None)
            cursor = domain_store.domain_key(found.team_id, found.id)
        rows = domain_store.DOMAINS.scan(spool, prefix="domain/", cursor=cursor, limit=limit)
        teams = team_names(spool)
        return [
            {
                "id": domain.id,
                "name": domain.name,
                "team_id": domain.team_id,
                "team": teams.get(domain.team_id),
                "status": domain.status,
                "region": domain.region,
                "created_at": domain.created_at,
            }
            for _, domain in rows
        ]


def _domains_named(spool: Spool, name_or_id: str, team_id: str | None) -> domain_store.DomainRecord:
    """The domain with this id, or this name in `team_id` (or in the only team that has it)."""
    teams = [team.id for team in accounts.list_teams(spool)]
    if team_id is not None:
        teams = [team for team in teams if team == team_id]
    by_id = [d for t in teams if (d := domain_store.load_domain(spool, t, name_or_id))]
    if by_id:
        return by_id[0]
    try:
        canonical = parse_domain_name(name_or_id)
    except ApiError as refusal:
        raise PostwireError(refusal.message) from None
    named = [d for t in teams if (d := domain_store.find_domain_by_name(spool, t, canonical))]
    if not named:
        raise PostwireError(f"no domain {name_or_id!r}")
    if len(named) > 1:
        raise PostwireError(
            f"several teams have a domain {canonical!r}: choose one with --team "
            f"({', '.join(d.team_id for d in named)}) or give the domain's id"
        )
    return named[0]


async def delete_domain(
    config: Config, name_or_id: str, team_id: str | None
) -> domain_store.DomainRecord:
    """Delete the domain as `DELETE /domains/{id}` does: its key and its name go with it."""
    async with opened_spool(config) as spool:
        found = _domains_named(spool, name_or_id, team_id)
        return await domain_store.delete_domain(spool, found.team_id, found.id)
