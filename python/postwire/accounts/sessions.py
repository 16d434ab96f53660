"""Dashboard sessions: a random 32-byte token in the browser's cookie, its SHA-256 in the spool.

A session is made only at login, with a fresh token (a token the browser held before is never
promoted, so fixation is impossible), and ends after `idle` without a request or `absolute`
after it was made, whichever comes first. While the second factor is pending it can reach only
the MFA challenge. Times are Unix seconds from the caller's clock, so tests inject one.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, replace
from typing import Final, TypeGuard

from postwire import _core
from postwire._core import WriteBatch
from postwire.store import sessions as store
from postwire.store.sessions import SessionRecord
from postwire.store.spool import Spool
from postwire.store.users import UserRecord

TOKEN_BYTES: Final = 32
# last_seen_at is written at most this often: a commit per page view would be waste.
LAST_SEEN_INTERVAL: Final = 60.0


@dataclass(frozen=True, slots=True)
class SessionLimits:
    idle_seconds: float
    absolute_seconds: float


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def is_live(session: SessionRecord, now: float, limits: SessionLimits) -> bool:
    return (
        now - session.last_seen_at < limits.idle_seconds
        and now - session.created_at < limits.absolute_seconds
    )


async def start_session(
    spool: Spool,
    user: UserRecord,
    team_id: str,
    *,
    mfa_pending: bool,
    method: str,
    now: float,
    address: str = "",
    user_agent: str = "",
    replaces: SessionRecord | None = None,
    limits: SessionLimits | None = None,
    sso_team_id: str = "",
) -> tuple[str, SessionRecord]:
    """Make a session with a fresh token; end `replaces` (the browser's previous session) in
    the same commit, and with `limits` the user's sessions that timed out (expired sessions
    are otherwise only ignored). Returns the token for the cookie, never available again."""
    token = _new_token()
    session = SessionRecord(
        id=_core.new_id(),
        token_sha256=token_sha256(token),
        user_id=user.id,
        team_id=team_id,
        method=method,
        mfa_pending=mfa_pending,
        csrf_token=secrets.token_urlsafe(TOKEN_BYTES),
        created_at=now,
        last_seen_at=now,
        address=address[:64],
        user_agent=user_agent[:300],
        sso_team_id=sso_team_id,
    )
    batch = WriteBatch()
    ending = [] if replaces is None else [replaces]
    if limits is not None:
        stored = store.sessions_of_user(spool, user.id)
        ending += [s for s in stored if not is_live(s, now, limits) and s not in ending]
    for ended in ending:
        store.delete_session(batch, ended)
    store.put_session(batch, session)
    await spool.commit(batch)
    return token, session


def load_session(
    spool: Spool, token: str | None, now: float, limits: SessionLimits
) -> SessionRecord | None:
    """The live session of the cookie's token, or None (expired ones are ended lazily)."""
    if not _plausible(token):
        return None
    return _live_or_none(store.get_session(spool, token_sha256(token)), now, limits)


async def load_session_parked(
    spool: Spool, token: str | None, now: float, limits: SessionLimits
) -> SessionRecord | None:
    """`load_session`, parked rather than blocking on a table store on the network (the
    dashboard's guard, on every request)."""
    if not _plausible(token):
        return None
    session = await store.get_session_parked(spool, token_sha256(token))
    return _live_or_none(session, now, limits)


def _plausible(token: str | None) -> TypeGuard[str]:
    return bool(token) and len(token or "") <= 200


def _live_or_none(
    session: SessionRecord | None, now: float, limits: SessionLimits
) -> SessionRecord | None:
    return session if session is not None and is_live(session, now, limits) else None


def needs_touch(session: SessionRecord, now: float) -> bool:
    return now - session.last_seen_at >= LAST_SEEN_INTERVAL


async def touch_session(spool: Spool, session: SessionRecord, now: float) -> SessionRecord:
    """Record activity (callers check `needs_touch` first); a session ended meanwhile stays so."""
    current = store.get_session(spool, session.token_sha256)
    if current is None:
        return session
    touched = replace(current, last_seen_at=now)
    batch = WriteBatch()
    store.put_session(batch, touched)
    await spool.commit(batch)
    return touched


async def complete_mfa(
    spool: Spool, session: SessionRecord, now: float
) -> tuple[str, SessionRecord]:
    """The second factor passed: replace the pending session by a full one with a new token
    (and a new CSRF token). Returns the token for the cookie."""
    token = _new_token()
    full = replace(
        session,
        id=_core.new_id(),
        token_sha256=token_sha256(token),
        mfa_pending=False,
        csrf_token=secrets.token_urlsafe(TOKEN_BYTES),
        last_seen_at=now,
    )
    batch = WriteBatch()
    store.delete_session(batch, session)
    store.put_session(batch, full)
    await spool.commit(batch)
    return token, full


async def switch_team(spool: Spool, session: SessionRecord, team_id: str) -> SessionRecord:
    """Show another team (the caller checked the membership)."""
    switched = replace(session, team_id=team_id)
    batch = WriteBatch()
    store.put_session(batch, switched)
    await spool.commit(batch)
    return switched


async def end_session(spool: Spool, session: SessionRecord) -> None:
    batch = WriteBatch()
    store.delete_session(batch, session)
    await spool.commit(batch)


def list_sessions(
    spool: Spool, user_id: str, now: float, limits: SessionLimits
) -> list[SessionRecord]:
    """The user's live sessions, most recently used first."""
    return _live_by_last_use(store.sessions_of_user(spool, user_id), now, limits)


async def list_sessions_parked(
    spool: Spool, user_id: str, now: float, limits: SessionLimits
) -> list[SessionRecord]:
    """`list_sessions`, parked rather than blocking on a table store on the network."""
    stored = await store.sessions_of_user_parked(spool, user_id)
    return _live_by_last_use(stored, now, limits)


def _live_by_last_use(
    stored: list[SessionRecord], now: float, limits: SessionLimits
) -> list[SessionRecord]:
    live = [s for s in stored if is_live(s, now, limits)]
    return sorted(live, key=lambda s: s.last_seen_at, reverse=True)


async def end_other_sessions(spool: Spool, keep: SessionRecord) -> int:
    """End every session of `keep`'s user but `keep` (expired ones too); how many ended."""
    others = [s for s in store.sessions_of_user(spool, keep.user_id) if s.id != keep.id]
    return await _end(spool, others)


async def end_all_sessions(spool: Spool, user_id: str) -> int:
    """End every session of the user (after a password reset, or when removed)."""
    return await _end(spool, store.sessions_of_user(spool, user_id))


async def _end(spool: Spool, ending: list[SessionRecord]) -> int:
    if ending:
        batch = WriteBatch()
        for session in ending:
            store.delete_session(batch, session)
        await spool.commit(batch)
    return len(ending)
