"""Password hashing: Argon2id through argon2-cffi, with its RFC 9106 low-memory profile
(64 MiB, 3 passes): a few tens of milliseconds per check, run off the event loop."""

from __future__ import annotations

from typing import Final

import argon2
import trio

_HASHER: Final = argon2.PasswordHasher.from_parameters(argon2.profiles.RFC_9106_LOW_MEMORY)
# Hashed when no user matches, so an unknown address costs the same work as a wrong password.
_DUMMY_HASH: Final = _HASHER.hash("not the password of anyone")

MIN_PASSWORD_LENGTH: Final = 10
MAX_PASSWORD_LENGTH: Final = 1024  # hashing megabytes on request would be a cheap attack


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
    return await trio.to_thread.run_sync(_HASHER.hash, password)


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
    return await trio.to_thread.run_sync(verify_password_sync, stored_hash, password)


def needs_rehash(stored_hash: str) -> bool:
    """Whether the hash was made with other parameters than today's (then store a new one)."""
    try:
        return _HASHER.check_needs_rehash(stored_hash)
    except argon2.exceptions.InvalidHashError:
        return True
