"""Throttles of password checks and of sign-ups, counted in the store (every process of the
service shares them) and counted before the password is checked (a burst of parallel guesses
gets no more checks than the same guesses one after another).

What is throttled is each (account, client address) pair and each client address across
accounts, never an account from everywhere: someone guessing at an account from their
address slows only themselves down, and the owner still signs in from theirs (a passkey
goes through no password check at all). Each allowance is counted over growing windows:
half of it in a minute, all of it in 15 minutes, twice it in an hour and four times it in a
day, so a guesser who keeps on waits until the minute ends, then the quarter hour, the hour,
the day. Refused attempts are not counted: waiting is what lifts a throttle.

An attempt is counted guarded by the key of its counts, after reading them: of many
parallel attempts, exactly the allowance is admitted. A right password takes its own count
back and clears its pair's (the address proved the password); a check that did not run
(`PasswordWorkBusy`) takes its count back. `postwire users unlock EMAIL` clears an account's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from postwire._core import WriteBatch
from postwire.accounts import passwords
from postwire.client_addresses import client_source
from postwire.config import AuthConfig
from postwire.store import login_attempts as store
from postwire.store import mfa_devices
from postwire.store.login_attempts import Bucket
from postwire.store.spool import Spool
from postwire.store.users import UserRecord, find_user_id_by_email, normalize_email

PAIR: Final = "pair"  # an account, as typed, from one client address
ADDRESS: Final = "address"  # one client address, whatever the account
SIGNUP: Final = "signup"  # accounts opened by sign-up from one client address


class Throttled(Exception):
    """Too many attempts: refused before any check; `retry_after` is in seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"throttled for {retry_after} s")
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Window:
    seconds: int
    allowed: int


@dataclass(frozen=True, slots=True)
class Counted:
    """The counts one attempt added; `pair` are those a right password clears."""

    buckets: tuple[Bucket, ...]
    pair: tuple[Bucket, ...] = ()


def growing_windows(limit: int) -> tuple[Window, ...]:
    """`limit` per 15 minutes, half of it per minute, twice it per hour, four times per day."""
    return (
        Window(60, max(1, limit // 2)),
        Window(15 * 60, limit),
        Window(3600, 2 * limit),
        Window(86400, 4 * limit),
    )


def signup_windows(limit: int) -> tuple[Window, ...]:
    return (Window(3600, limit), Window(86400, 3 * limit))


def _pair_subject(email: str, address: str) -> str:
    # The source last: it holds no space, so an account's pairs are found by the part before.
    return f"{normalize_email(email)} {client_source(address)}"


def _counts(
    scope: str, subject: str, windows: tuple[Window, ...], now: float
) -> list[tuple[Window, Bucket]]:
    return [(window, store.bucket(scope, subject, window.seconds, now)) for window in windows]


def retry_after(counts: list[tuple[Window, Bucket, int]], now: float) -> int | None:
    """Seconds until every full window has ended (None: none is full)."""
    ends = [bucket.ends_at for window, bucket, n in counts if n >= window.allowed]
    return None if not ends else max(1, math.ceil(max(ends) - now))


async def _count_attempt(spool: Spool, counts: list[tuple[Window, Bucket]], now: float) -> None:
    """Count one attempt in every bucket of `counts`, or raise Throttled if one is full."""
    async for attempt in spool.guarded(bucket.key for _, bucket in counts):
        with attempt:
            read = [(window, bucket, store.count(spool, bucket)) for window, bucket in counts]
            wait = retry_after(read, now)
            if wait is not None:
                raise Throttled(wait)
            batch = WriteBatch()
            store.add(batch, [bucket for _, bucket in counts], 1)
            store.prune_expired(spool, batch, now)
            await spool.commit(batch)


async def _take_back(spool: Spool, counted: Counted, *, clear_pair: bool) -> None:
    batch = WriteBatch()
    if clear_pair:
        store.drop(batch, counted.pair)
    kept = [bucket for bucket in counted.buckets if not (clear_pair and bucket in counted.pair)]
    store.add(batch, kept, -1)
    await spool.commit(batch)


async def check_password(
    spool: Spool,
    auth: AuthConfig,
    email: str,
    address: str,
    stored_hash: str | None,
    password: str,
    now: float,
) -> bool:
    """Whether `password` matches `stored_hash` (None: no such account; the same work is
    done), the attempt counted for `email` as typed from `address` before the check.
    Raises Throttled (nothing checked), or `PasswordWorkBusy` (nothing checked or counted)."""
    pair = _counts(
        PAIR, _pair_subject(email, address), growing_windows(auth.max_login_failures), now
    )
    source_windows = growing_windows(auth.max_login_failures_per_address)
    source = _counts(ADDRESS, client_source(address), source_windows, now)
    await _count_attempt(spool, pair + source, now)
    counted = Counted(tuple(b for _, b in pair + source), tuple(b for _, b in pair))
    try:
        matched = await passwords.verify_password(stored_hash, password)
    except passwords.PasswordWorkBusy:
        await _take_back(spool, counted, clear_pair=False)
        raise
    if matched:
        await _take_back(spool, counted, clear_pair=True)
    return matched


async def check_current_password(
    spool: Spool, auth: AuthConfig, user: UserRecord, password: str, address: str, now: float
) -> bool:
    """For a signed-in person proving again who they are: whether `password` is theirs.
    Wrong ones count as failed sign-ins, so a stolen session cannot guess it; a throttled
    attempt is simply not right."""
    try:
        return await check_password(
            spool, auth, user.email, address, user.password_hash, password, now
        )
    except Throttled:
        return False


async def count_signup(spool: Spool, auth: AuthConfig, address: str, now: float) -> Counted:
    """Count a sign-up from `address` before the account is made, or raise Throttled; give
    the count back with `signup_not_made` if no account comes of it."""
    windows = signup_windows(auth.max_signups_per_address)
    counts = _counts(SIGNUP, client_source(address), windows, now)
    await _count_attempt(spool, counts, now)
    return Counted(tuple(bucket for _, bucket in counts))


async def signup_not_made(spool: Spool, counted: Counted) -> None:
    await _take_back(spool, counted, clear_pair=False)


async def unlock(spool: Spool, email: str) -> int:
    """Clear every throttle of the account `email` (from any address) and its count of wrong
    second-factor codes. Returns how many counts were cleared."""
    account = normalize_email(email)
    keys = store.buckets_where(spool, PAIR, lambda subject: subject.rpartition(" ")[0] == account)
    batch = WriteBatch()
    store.drop_keys(batch, keys)
    await spool.commit(batch)
    user_id = find_user_id_by_email(spool, email)
    if user_id is not None:
        async for attempt in spool.guarded(mfa_devices.failures_key(user_id)):
            with attempt:
                await mfa_devices.put_code_failures(spool, user_id, None)
    return len(keys)
