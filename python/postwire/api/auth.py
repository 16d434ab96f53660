"""Who is calling: the API key in `Authorization: Bearer ...`, and what it may do."""

from __future__ import annotations

from dataclasses import dataclass

from quart import g

from postwire.errors import ApiError
from postwire.store.accounts import ApiKeyRecord, authenticate_parked
from postwire.store.spool import Spool

# The only calls a sending_access key may make.
SEND_ENDPOINTS = frozenset({("POST", "/emails"), ("POST", "/emails/batch")})


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated key behind a request; every handler scopes its work to `team_id`."""

    key: ApiKeyRecord

    @property
    def team_id(self) -> str:
        return self.key.team_id


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    # The Go SDK trims spaces and quotes; others may not, so accept them here too.
    token = token.strip().strip("'\"")
    return token or None


async def authenticate_caller(
    spool: Spool, authorization: str | None, method: str, path: str
) -> Caller:
    token = bearer_token(authorization)
    if token is None:
        raise ApiError(401, "missing_api_key", "Missing API key in the authorization header.")
    key = await authenticate_parked(spool, token)
    if key is None:
        raise ApiError(400, "validation_error", "API key is invalid")
    if key.permission == "sending_access" and (method, path.rstrip("/")) not in SEND_ENDPOINTS:
        raise ApiError(401, "restricted_api_key", "This API key is restricted to only send emails.")
    return Caller(key)


def current_caller() -> Caller:
    """The caller of the request being handled (set by the app before every handler)."""
    caller: Caller = g.caller
    return caller
