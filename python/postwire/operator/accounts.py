"""`postwire keys list|revoke` and `users list|reset-mfa`: every team's keys and users from the
shell, changed through the same store functions the API and the dashboard call
(`accounts.delete_api_key`)."""

from __future__ import annotations

from typing import Any

from postwire._core import WriteBatch
from postwire.config import Config
from postwire.errors import PostwireError
from postwire.operator.store_access import opened_spool
from postwire.store import accounts, mfa_devices
from postwire.store import sessions as session_store
from postwire.store import users as user_store
from postwire.store.spool import Spool


def team_names(spool: Spool) -> dict[str, str]:
    return {team.id: team.name for team in accounts.list_teams(spool)}


async def list_keys(config: Config, limit: int, after: str | None) -> list[dict[str, Any]]:
    """A page of every team's keys, by team then age; `after` is the last key id shown."""
    async with opened_spool(config) as spool:
        cursor = None
        if after is not None:
            key = _find_key(spool, after)
            cursor = f"key/{key.team_id}/{key.id}"
        rows = accounts.API_KEYS.scan(spool, prefix="key/", cursor=cursor, limit=limit)
        teams = team_names(spool)
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
        teams = team_names(spool)
        return [
            {
                "id": user.id,
                "email": user.email,
                "name": user.name,
                "teams": [
                    f"{teams.get(m.team_id, m.team_id)} ({m.role})"
                    for m in user_store.memberships_of_user(spool, user.id)
                ],
                "mfa": mfa_devices.user_has_mfa(spool, user.id),
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
