"""Each sending domain's last health verdict, in the spool's `domain_health` table under
`{team_id}/{domain_id}`: its state, the rates it was judged on, and since when it has been in
that state. The evaluator compares a new verdict with this record to emit a warning once per
crossing, not at every evaluation; pages read it to show the state and the banner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

# Domains a team's banner looks at, at most.
MAX_TEAM_DOMAINS: Final = 1_000


@dataclass(frozen=True, slots=True)
class DomainHealthRecord:
    team_id: str
    domain_id: str
    domain_name: str
    state: str  # "ok" | "warning" | "critical"
    since_ms: int  # when it entered this state
    evaluated_at_ms: int
    # One per window and rate: {window, metric, rate, volume, state (None: too few to judge)}.
    checks: list[dict[str, Any]] = field(default_factory=list)
    warned_at_ms: int | None = None  # the last warning event, if any


DOMAIN_HEALTH = Table("domain_health", DomainHealthRecord)


def health_key(team_id: str, domain_id: str) -> str:
    return f"{team_id}/{domain_id}"


def get_domain_health(spool: Spool, team_id: str, domain_id: str) -> DomainHealthRecord | None:
    return DOMAIN_HEALTH.get(spool, health_key(team_id, domain_id))


async def get_domain_health_parked(
    spool: Spool, team_id: str, domain_id: str
) -> DomainHealthRecord | None:
    return await DOMAIN_HEALTH.aget(spool, health_key(team_id, domain_id))


def put_domain_health(batch: WriteBatch, record: DomainHealthRecord) -> None:
    DOMAIN_HEALTH.put(batch, health_key(record.team_id, record.domain_id), record)


def delete_domain_health(batch: WriteBatch, team_id: str, domain_id: str) -> None:
    DOMAIN_HEALTH.delete(batch, health_key(team_id, domain_id))


async def team_domain_health(spool: Spool, team_id: str) -> list[DomainHealthRecord]:
    """The team's domains' records (one scan), in domain id order; parked rather than
    blocking on a table store on the network."""
    rows = await DOMAIN_HEALTH.ascan(spool, prefix=f"{team_id}/", limit=MAX_TEAM_DOMAINS)
    return [record for _, record in rows]


async def unhealthy_domains(spool: Spool, team_id: str) -> list[DomainHealthRecord]:
    """The team's domains past a threshold (the dashboard's banner, on every page), worst
    first."""
    bad = [
        r for r in await team_domain_health(spool, team_id) if r.state in ("warning", "critical")
    ]
    return sorted(bad, key=lambda r: (r.state != "critical", r.domain_name))
