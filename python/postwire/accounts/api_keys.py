"""A team's API keys as its people create them: the rules of a key's name, permission and
domain, shared by the REST API, the dashboard and the `keys` command. The records and tokens
are `store.accounts`'."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from postwire.domains import store as domain_store
from postwire.errors import ApiError, validation_error
from postwire.store import accounts
from postwire.store.accounts import PERMISSIONS, ApiKeyRecord, Permission
from postwire.store.spool import Spool

MAX_NAME_LENGTH: Final = 50


def key_name(name: object) -> str:
    """A key's name as given, checked: 422 names what is wrong."""
    if name is None:
        raise ApiError(422, "missing_required_field", "Missing `name` field.")
    if not isinstance(name, str) or not name.strip():
        raise validation_error("The `name` field must be a non-empty string.")
    if len(name) > MAX_NAME_LENGTH:
        raise validation_error(f"The `name` field must be at most {MAX_NAME_LENGTH} characters.")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise validation_error("The `name` field must not contain control characters.")
    return name


def key_permission(permission: object) -> Permission:
    for allowed in PERMISSIONS:
        if permission == allowed:
            return allowed
    raise validation_error("The `permission` field must be `full_access` or `sending_access`.")


def check_key_domain(spool: Spool, team_id: str, domain_id: str) -> None:
    """A key may only be locked to one of its team's own domains."""
    if domain_store.load_domain(spool, team_id, domain_id) is None:
        raise validation_error(f"The `domain_id` {domain_id!r} is not one of your domains.")


async def create_team_api_key(
    spool: Spool,
    team_id: str,
    name: object,
    permission: object,
    domain_id: object,
    now: datetime,
) -> tuple[ApiKeyRecord, str]:
    """Check what was asked and create the key; return it and its token, shown this once.
    A domain is kept only for a `sending_access` key."""
    checked_name, checked_permission = key_name(name), key_permission(permission)
    if domain_id is not None and not isinstance(domain_id, str):
        raise validation_error("The `domain_id` field must be a string.")
    if domain_id is not None and checked_permission == "sending_access":
        check_key_domain(spool, team_id, domain_id)
    return await accounts.create_api_key(
        spool, team_id, checked_name, checked_permission, domain_id, now
    )


def find_api_key(spool: Spool, team_id: str, key_id: str) -> ApiKeyRecord:
    """The team's key; 404 `not_found` for an unknown id or another team's."""
    return _found(accounts.get_api_key(spool, team_id, key_id))


async def find_api_key_parked(spool: Spool, team_id: str, key_id: str) -> ApiKeyRecord:
    """`find_api_key` with a parked read."""
    return _found(await accounts.get_api_key_parked(spool, team_id, key_id))


def _found(key: ApiKeyRecord | None) -> ApiKeyRecord:
    if key is None:
        raise ApiError(404, "not_found", "API key not found")
    return key
