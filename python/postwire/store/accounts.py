"""Teams and API keys.

Every key, domain, email and event belongs to a team. A key's token is shown once, at creation;
only its SHA-256 is kept. Tokens look like Resend's, `re_<8 id chars>_<24 secret chars>`: the
first part finds the key without a scan, the whole token is compared by hash in constant time.
SHA-256 (not a slow password hash) is right here: the secret part carries ~143 random bits.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import KeyExistsError
from postwire.store.spool import Spool
from postwire.store.tables import Table

Permission = Literal["full_access", "sending_access"]
PERMISSIONS: tuple[Permission, ...] = ("full_access", "sending_access")

TOKEN_PREFIX = "re_"
_ALPHABET = string.ascii_letters + string.digits
_LOOKUP_LEN = 8
_SECRET_LEN = 24


@dataclass(frozen=True, slots=True)
class TeamRecord:
    id: str
    name: str
    created_at: str


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    id: str
    team_id: str
    name: str
    permission: str
    domain_id: str | None
    lookup: str
    token_sha256: str
    created_at: str
    last_used_at: str | None = None


@dataclass(frozen=True, slots=True)
class TokenIndex:
    """Where the key whose token starts with a given lookup part lives."""

    team_id: str
    key_id: str


TEAMS = Table("teams", TeamRecord)
API_KEYS = Table("api_keys", ApiKeyRecord)
# Shares the table with the keys under its own prefix, so both commit in one batch.
TOKEN_INDEX = Table("api_keys", TokenIndex)


def contract_timestamp(moment: datetime) -> str:
    """The REST API's timestamp text: `2023-10-06 23:47:56.678000+00`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def iso_from_contract_timestamp(text: str) -> str:
    """The REST API's `2026-11-23 10:00:00.123000+00` (always UTC, fixed widths) as a webhook
    timestamp; cut rather than parsed, as it is done for every event."""
    return f"{text[:10]}T{text[11:23]}Z"


def _key_key(team_id: str, key_id: str) -> str:
    return f"key/{team_id}/{key_id}"


def _token_key(lookup: str) -> str:
    return f"token/{lookup}"


def _token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _random_text(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


async def create_team(spool: Spool, name: str, now: datetime) -> TeamRecord:
    batch = WriteBatch()
    team = add_team(batch, name, now)
    await spool.commit(batch)
    return team


def add_team(batch: WriteBatch, name: str, now: datetime) -> TeamRecord:
    """A new team named `name`, made in `batch`."""
    team = TeamRecord(id=_core.new_id(), name=name, created_at=contract_timestamp(now))
    TEAMS.insert(batch, team.id, team)
    return team


def list_teams(spool: Spool) -> list[TeamRecord]:
    return [team for _, team in TEAMS.scan(spool, limit=1_000_000)]


async def create_api_key(
    spool: Spool,
    team_id: str,
    name: str,
    permission: Permission,
    domain_id: str | None,
    now: datetime,
) -> tuple[ApiKeyRecord, str]:
    """Create a key; return its record and the token, which is never available again."""
    while True:
        lookup = _random_text(_LOOKUP_LEN)
        token = f"{TOKEN_PREFIX}{lookup}_{_random_text(_SECRET_LEN)}"
        key = ApiKeyRecord(
            id=_core.new_id(),
            team_id=team_id,
            name=name,
            permission=permission,
            domain_id=domain_id if permission == "sending_access" else None,
            lookup=lookup,
            token_sha256=_token_sha256(token),
            created_at=contract_timestamp(now),
        )
        batch = WriteBatch()
        API_KEYS.put(batch, _key_key(team_id, key.id), key)
        TOKEN_INDEX.insert(batch, _token_key(lookup), TokenIndex(team_id, key.id))
        try:
            await spool.commit(batch)
        except KeyExistsError:  # the 8-character lookup part collided: draw again
            continue
        return key, token


def token_lookup(token: str) -> str | None:
    """The part of a token that names its key (no secret), or None if it is no token."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    return token[len(TOKEN_PREFIX) : len(TOKEN_PREFIX) + _LOOKUP_LEN]


def authenticate(spool: Spool, token: str) -> ApiKeyRecord | None:
    """The live key whose token this is, or None. Compares hashes in constant time."""
    lookup = token_lookup(token)
    if lookup is None:
        return None
    index = TOKEN_INDEX.get(spool, _token_key(lookup))
    key = None if index is None else API_KEYS.get(spool, _key_key(index.team_id, index.key_id))
    return _key_if_token_matches(token, key)


async def authenticate_parked(spool: Spool, token: str) -> ApiKeyRecord | None:
    """`authenticate` with parked reads: every API request makes it."""
    lookup = token_lookup(token)
    if lookup is None:
        return None
    index = await TOKEN_INDEX.aget(spool, _token_key(lookup))
    key = (
        None if index is None else await API_KEYS.aget(spool, _key_key(index.team_id, index.key_id))
    )
    return _key_if_token_matches(token, key)


def _key_if_token_matches(token: str, key: ApiKeyRecord | None) -> ApiKeyRecord | None:
    # Hash even when nothing was found, so timing does not tell whether the lookup part exists.
    presented = _token_sha256(token)
    expected = key.token_sha256 if key is not None else "0" * 64
    if not hmac.compare_digest(presented, expected):
        return None
    return key


def get_api_key(spool: Spool, team_id: str, key_id: str) -> ApiKeyRecord | None:
    return API_KEYS.get(spool, _key_key(team_id, key_id))


def list_api_keys(spool: Spool, team_id: str) -> list[ApiKeyRecord]:
    """The team's keys, newest first (ids are time-ordered)."""
    rows = API_KEYS.scan(spool, prefix=f"key/{team_id}/", reverse=True, limit=1_000_000)
    return [key for _, key in rows]


async def get_api_key_parked(spool: Spool, team_id: str, key_id: str) -> ApiKeyRecord | None:
    return await API_KEYS.aget(spool, _key_key(team_id, key_id))


async def list_api_keys_parked(spool: Spool, team_id: str) -> list[ApiKeyRecord]:
    """`list_api_keys` with a parked read."""
    rows = await API_KEYS.ascan(spool, prefix=f"key/{team_id}/", reverse=True, limit=1_000_000)
    return [key for _, key in rows]


async def rename_api_key(spool: Spool, key: ApiKeyRecord, name: str) -> ApiKeyRecord:
    renamed = replace(key, name=name)
    batch = WriteBatch()
    API_KEYS.put(batch, _key_key(key.team_id, key.id), renamed)
    await spool.commit(batch)
    return renamed


async def delete_api_key(spool: Spool, key: ApiKeyRecord) -> None:
    batch = WriteBatch()
    API_KEYS.delete(batch, _key_key(key.team_id, key.id))
    TOKEN_INDEX.delete(batch, _token_key(key.lookup))
    await spool.commit(batch)


async def record_key_use(spool: Spool, key: ApiKeyRecord, now: datetime) -> None:
    """Set `last_used_at`; callers throttle this, it costs a commit."""
    current = await get_api_key_parked(spool, key.team_id, key.id)
    if current is None:  # deleted meanwhile
        return
    batch = WriteBatch()
    used = replace(current, last_used_at=contract_timestamp(now))
    API_KEYS.put(batch, _key_key(key.team_id, key.id), used)
    await spool.commit(batch)
