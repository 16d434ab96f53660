"""Failed logins, counted per account and per client address over a sliding window; and
sign-ups per client address.

Past `auth.max_login_failures` failures within WINDOW_SECONDS, further attempts for that
account or from that address are refused before the password is checked, with the same answer
whether or not the account exists. A success clears the account's count (not the address's:
one good password must not reset an attacker's budget for others).
"""

from __future__ import annotations

from typing import Final

from postwire._core import WriteBatch
from postwire.store import sessions as store
from postwire.store.sessions import LoginFailuresRecord
from postwire.store.spool import Spool
from postwire.store.users import normalize_email

WINDOW_SECONDS: Final = 15 * 60.0
ACCOUNT: Final = "account"
ADDRESS: Final = "address"
SIGNUP: Final = "signup"
# Accounts one client address may open by sign-up within the window.
MAX_SIGNUPS_PER_ADDRESS: Final = 5


def _subjects(email: str, address: str) -> list[tuple[str, str]]:
    return [(ACCOUNT, normalize_email(email)), (ADDRESS, address)]


def _recent(record: LoginFailuresRecord | None, now: float) -> list[float]:
    if record is None:
        return []
    return [t for t in record.times if now - t < WINDOW_SECONDS]


def login_blocked(spool: Spool, email: str, address: str, now: float, limit: int) -> bool:
    """Whether the account or the address used up its failures in the window."""
    return any(
        len(_recent(store.get_login_failures(spool, scope, subject), now)) >= limit
        for scope, subject in _subjects(email, address)
    )


async def record_failure(spool: Spool, email: str, address: str, now: float, limit: int) -> None:
    batch = WriteBatch()
    for scope, subject in _subjects(email, address):
        times = _recent(store.get_login_failures(spool, scope, subject), now)
        times = [*times, now][-limit:]  # more than the limit never changes the answer
        store.put_login_failures(batch, scope, subject, LoginFailuresRecord(times))
    await spool.commit(batch)


async def clear_account_failures(spool: Spool, email: str) -> None:
    if store.get_login_failures(spool, ACCOUNT, normalize_email(email)) is None:
        return
    batch = WriteBatch()
    store.delete_login_failures(batch, ACCOUNT, normalize_email(email))
    await spool.commit(batch)


def signup_blocked(spool: Spool, address: str, now: float) -> bool:
    """Whether the client address opened its share of accounts within the window."""
    recent = _recent(store.get_login_failures(spool, SIGNUP, address), now)
    return len(recent) >= MAX_SIGNUPS_PER_ADDRESS


async def record_signup(spool: Spool, address: str, now: float) -> None:
    times = _recent(store.get_login_failures(spool, SIGNUP, address), now)
    batch = WriteBatch()
    record = LoginFailuresRecord([*times, now][-MAX_SIGNUPS_PER_ADDRESS:])
    store.put_login_failures(batch, SIGNUP, address, record)
    await spool.commit(batch)
