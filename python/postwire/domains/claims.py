"""When a team verifies a name, every other team's domain of that name is dropped.

Adding a domain claims nothing (`domains.store`); verifying it takes the name. The verifier calls
`drop_other_claims` once a domain has become verified and holds its name: other teams' domains
of the name become `failed`, with a `failure_reason` and a `domain.updated` webhook event. This
is the rare event of a name changing hands, so it reads every domain rather than keep an index
of names across teams. A claim missed here (the service stopped in between) is dropped by its
own next check, which finds the name taken.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from postwire.domains.store import DomainRecord, drop_claim, scan_all_domains

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.store.spool import Spool

log = logging.getLogger("postwire.domains")


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
