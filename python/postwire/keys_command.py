"""`postwire keys create`: bootstrap a team and its keys from the shell, on the same spool as
`serve` (LMDB lets both processes use it at once)."""

from __future__ import annotations

from datetime import UTC, datetime

import trio

from postwire.api.api_keys import MAX_NAME_LENGTH
from postwire.config import Config
from postwire.domains.store import load_domain
from postwire.errors import PostwireError
from postwire.store import accounts
from postwire.store.accounts import Permission
from postwire.store.spool import serve_spool

DEFAULT_TEAM_NAME = "default"


async def create_key(
    config: Config,
    name: str,
    permission: Permission,
    domain_id: str | None,
    team_id: str | None,
    new_team: str | None = None,
) -> tuple[str, str]:
    """Create a key; return its id and token. With no team yet (or `new_team`), create one."""
    if not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise PostwireError(f"the key name must be 1 to {MAX_NAME_LENGTH} characters")
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = datetime.now(UTC)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        teams = accounts.list_teams(spool)
        if new_team is not None:
            team_id = (await accounts.create_team(spool, new_team, now)).id
        elif team_id is not None:
            if team_id not in {team.id for team in teams}:
                raise PostwireError(f"no team {team_id!r}")
        elif len(teams) > 1:
            raise PostwireError("there are several teams: choose one with --team")
        elif teams:
            team_id = teams[0].id
        else:
            team_id = (await accounts.create_team(spool, DEFAULT_TEAM_NAME, now)).id
        if domain_id is not None and load_domain(spool, team_id, domain_id) is None:
            raise PostwireError(f"the team has no domain {domain_id!r}")
        key, token = await accounts.create_api_key(spool, team_id, name, permission, domain_id, now)
        nursery.cancel_scope.cancel()
    return key.id, token
