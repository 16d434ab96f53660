"""Password hashing: Argon2id through argon2-cffi, with its RFC 9106 low-memory profile
(64 MiB, 3 passes): a few tens of milliseconds per check, run off the event loop.

Each hash or check holds 64 MiB while it runs, so a process runs only a few at once
(`auth.password_checks_at_once`) and lets only so many wait (`auth.password_checks_waiting`):
past that, `PasswordWorkBusy` (answered 503) rather than a queue, or threads, without end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

import argon2
import trio

from postwire.errors import PostwireError

_HASHER: Final = argon2.PasswordHasher.from_parameters(argon2.profiles.RFC_9106_LOW_MEMORY)
# Hashed when no user matches, so an unknown address costs the same work as a wrong password.
_DUMMY_HASH: Final = _HASHER.hash("not the password of anyone")

MIN_PASSWORD_LENGTH: Final = 10
MAX_PASSWORD_LENGTH: Final = 1024  # hashing megabytes on request would be a cheap attack

DEFAULT_AT_ONCE: Final = 2
DEFAULT_WAITING: Final = 16

ResultT = TypeVar("ResultT")


class PasswordWorkBusy(PostwireError):
    """As many password hashes and checks as may wait in this process are waiting already:
    the request is refused (HTTP 503) and may be sent again in a moment."""


@dataclass(frozen=True, slots=True)
class _WorkBound:
    limiter: trio.CapacityLimiter
    waiting: int


# One per process: the memory it bounds is the process's.
_bound = _WorkBound(trio.CapacityLimiter(DEFAULT_AT_ONCE), DEFAULT_WAITING)


def bound_password_work(at_once: int, waiting: int) -> None:
    """Let this process run at most `at_once` hashes and checks together, with at most
    `waiting` more queued; the dashboard sets it from `auth` when it starts."""
    global _bound
    _bound = _WorkBound(trio.CapacityLimiter(at_once), waiting)


async def _run_bounded(work: Callable[..., ResultT], *args: object) -> ResultT:
    bound = _bound
    if bound.limiter.available_tokens == 0 and (
        bound.limiter.statistics().tasks_waiting >= bound.waiting
    ):
        raise PasswordWorkBusy("too many password checks at once")
    return await trio.to_thread.run_sync(work, *args, limiter=bound.limiter)


def password_problem(password: str) -> str | None:
    """Why `password` cannot be chosen, in plain words, or None."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"Choose a password of at least {MIN_PASSWORD_LENGTH} characters."
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"Choose a password of at most {MAX_PASSWORD_LENGTH} characters."
    return None


def hash_password_sync(password: str) -> str:
    return _HASHER.hash(password)


async def hash_password(password: str) -> str:
    """The Argon2id hash of `password`; `PasswordWorkBusy` when too many wait already."""
    return await _run_bounded(_HASHER.hash, password)


def verify_password_sync(stored_hash: str | None, password: str) -> bool:
    """Whether `password` matches; with no stored hash, does the same work and says no."""
    if len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        matched = _HASHER.verify(stored_hash or _DUMMY_HASH, password)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
        return False
    return matched and stored_hash is not None


async def verify_password(stored_hash: str | None, password: str) -> bool:
    """`verify_password_sync` off the event loop; `PasswordWorkBusy` when too many wait."""
    return await _run_bounded(verify_password_sync, stored_hash, password)


def needs_rehash(stored_hash: str) -> bool:
    """Whether the hash was made with other parameters than today's (then store a new one)."""
    try:
        return _HASHER.check_needs_rehash(stored_hash)
    except argon2.exceptions.InvalidHashError:
        return True
