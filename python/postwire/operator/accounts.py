"""`postwire keys list|revoke`, `users list|reset-mfa` and `domains list|delete`: every team's
keys, users and domains from the shell, changed through the same store functions the API and
the dashboard call (`accounts.delete_api_key`, `domains.store.delete_domain`)."""

from __future__ import annotations

from typing import Any

from postwire._core import WriteBatch
from postwire.accounts.mfa import user_has_mfa
from postwire.config import Config
from postwire.domains import store as domain_store
from postwire.domains.records import parse_domain_name
from postwire.errors import ApiError, PostwireError
from postwire.operator.store_access import opened_spool
from postwire.store import accounts, mfa_devices
from postwire.store import sessions as session_store
from postwire.store import users as user_store
from postwire.store.spool import Spool


def _team_names(spool: Spool) -> dict[str, str]:
    return {team.id: team.name for team in accounts.list_teams(spool)}


async def list_keys(config: Config, limit: int, after: str | None) -> list[dict[str, Any]]:
    """A page of every team's keys, by team then age; `after` is the last key id shown."""
    async with opened_spool(config) as spool:
        cursor = None
        if after is not None:
            key = _find_key(spool, after)
            cursor = f"key/{key.team_id}/{key.id}"
        rows = accounts.API_KEYS.scan(spool, prefix="key/", cursor=cursor, limit=limit)
        teams = _team_names(spool)
        return [
            {
                "id": key.id,
                "name": key.name,
                "team_id": key.team_id,
                "team": teams.get(key.team_id),
                "permission": key.permission,
                "domain_id": key.domain_id,
                "created_at": key.created_at,
                "last_used_at": key.last_used_at,
            }
            for _, key in rows
        ]


def _find_key(spool: Spool, key_id: str) -> accounts.ApiKeyRecord:
    for team in accounts.list_teams(spool):
        key = accounts.get_api_key(spool, team.id, key_id)
        if key is not None:
            return key
    raise PostwireError(f"no API key {key_id!r}")


async def revoke_key(config: Config, key_id: str) -> accounts.ApiKeyRecord:
    """Delete the key as `DELETE /api-keys/{id}` does: its token stops working at once."""
    async with opened_spool(config) as spool:
        key = _find_key(spool, key_id)
        await accounts.delete_api_key(spool, key)
        return key


async def list_users(config: Config, limit: int, after: str | None) -> list[dict[str, Any]]:
    """A page of the dashboard's users, oldest first, with their teams and whether MFA is on."""
    async with opened_spool(config) as spool:
        rows = user_store.USERS.scan(spool, cursor=after, limit=limit)
        teams = _team_names(spool)
        return [
            {
                "id": user.id,
                "email": user.email,
                "name": user.name,
                "teams": [
                    f"{teams.get(m.team_id, m.team_id)} ({m.role})"
                    for m in user_store.memberships_of_user(spool, user.id)
                ],
                "mfa": user_has_mfa(spool, user.id),
                "password": user.password_hash is not None,
                "created_at": user.created_at,
            }
            for _, user in rows
        ]


async def reset_mfa(config: Config, email: str) -> tuple[int, int]:
    """Remove every second factor of the account (authenticator apps, passkeys, recovery
    codes) and end its sessions, in one commit: its owner signs in with the password alone
    and sets MFA up again (at once, if a team requires it). Returns (factors, sessions)."""
    async with opened_spool(config) as spool:
        user_id = user_store.find_user_id_by_email(spool, email)
        if user_id is None:
            raise PostwireError(f"no dashboard user {email!r}")
        batch = WriteBatch()
        devices = mfa_devices.delete_all_of_user(spool, batch, user_id)
        sessions = session_store.sessions_of_user(spool, user_id)
        for session in sessions:
            session_store.delete_session(batch, session)
        await spool.commit(batch)
        return len(devices), len(sessions)


async def list_domains(config: Config, limit: int, after: str | None) -> list[dict[str, Any]]:
    """A page of every team's domains, by team then age; `after` is the last domain id shown."""
    async with opened_spool(config) as spool:
        cursor = None
        if after is not None:
            found = _domains_named(spool, after, None)
            cursor = domain_store.domain_key(found.team_id, found.id)
        rows = domain_store.DOMAINS.scan(spool, prefix="domain/", cursor=cursor, limit=limit)
        teams = _team_names(spool)
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
