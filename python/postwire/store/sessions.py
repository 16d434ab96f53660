"""Dashboard sessions.

Tables:
    sessions        `token/{sha256 of the cookie token}` -> SessionRecord
                    `user/{user_id}/{session_id}` -> SessionRef (a user's sessions, one scan)

Only the SHA-256 of a session token is kept: a copy of the spool signs no one in. SHA-256,
not a password hash, because the token carries 256 random bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from postwire._core import WriteBatch
from postwire.concurrency import in_order
from postwire.store.spool import Spool
from postwire.store.tables import Table


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    token_sha256: str
    user_id: str
    team_id: str  # the team the dashboard shows; switched on the team menu
    method: str  # how the person signed in: "password", "google", "github", "sso", ...
    mfa_pending: bool  # the first factor passed, the second not yet
    csrf_token: str
    created_at: float  # Unix seconds
    last_seen_at: float
    address: str = ""
    user_agent: str = ""
    # The team whose identity provider started the session ("" for any other way in): such a
    # session shows that team alone, and is the only kind that passes its "enforce SSO".
    sso_team_id: str = ""


@dataclass(frozen=True, slots=True)
class SessionRef:
    token_sha256: str


SESSIONS: Final = Table("sessions", SessionRecord)
SESSION_REFS: Final = Table("sessions", SessionRef)

_ALL: Final = 1_000_000
# A user's sessions read at once from a table store on the network.
_SESSIONS_AT_ONCE: Final = 16


def _token_key(token_sha256: str) -> str:
    return f"token/{token_sha256}"


def _ref_key(user_id: str, session_id: str) -> str:
    return f"user/{user_id}/{session_id}"


def get_session(spool: Spool, token_sha256: str) -> SessionRecord | None:
    return SESSIONS.get(spool, _token_key(token_sha256))


async def get_session_parked(spool: Spool, token_sha256: str) -> SessionRecord | None:
    """`get_session`, parked rather than blocking on a table store on the network."""
    return await SESSIONS.aget(spool, _token_key(token_sha256))


def put_session(batch: WriteBatch, session: SessionRecord) -> None:
    SESSIONS.put(batch, _token_key(session.token_sha256), session)
    SESSION_REFS.put(batch, _ref_key(session.user_id, session.id), SessionRef(session.token_sha256))


def delete_session(batch: WriteBatch, session: SessionRecord) -> None:
    SESSIONS.delete(batch, _token_key(session.token_sha256))
    SESSION_REFS.delete(batch, _ref_key(session.user_id, session.id))


def sessions_of_user(spool: Spool, user_id: str) -> list[SessionRecord]:
    """The user's stored sessions (expired ones included until swept), oldest first."""
    found = []
    for _, ref in SESSION_REFS.scan(spool, prefix=f"user/{user_id}/", limit=_ALL):
        session = get_session(spool, ref.token_sha256)
        if session is not None:
            found.append(session)
    return found


async def sessions_of_user_parked(spool: Spool, user_id: str) -> list[SessionRecord]:
    """`sessions_of_user`, parked rather than blocking on a table store on the network: the
    sessions are read together."""
    refs = await SESSION_REFS.ascan(spool, prefix=f"user/{user_id}/", limit=_ALL)

    async def session_of(ref: tuple[str, SessionRef]) -> SessionRecord | None:
        return await get_session_parked(spool, ref[1].token_sha256)

    found = await in_order(session_of, refs, at_once=_SESSIONS_AT_ONCE)
    return [session for session in found if session is not None]
