"""Counts of password sign-in attempts and sign-ups, per subject and time window.

Table:
    login_attempts  `{window end, Unix seconds, 12 digits}/{scope}/{window seconds}/{subject}`
                    -> an integer kept with `WriteBatch.add_counter` (atomic across processes)

Keys start with the end of their window, so expired counts sort first and each new count
deletes a few of them: the table holds little more than the windows still running.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool

TABLE: Final = "login_attempts"
# Expired counts deleted with each count added: more than the few an attempt adds.
_PRUNED_PER_ATTEMPT: Final = 16
_PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class Bucket:
    """One subject's count over one window."""

    key: str
    ends_at: int  # Unix seconds


def bucket(scope: str, subject: str, window_seconds: int, now: float) -> Bucket:
    start = int(now) - int(now) % window_seconds
    ends_at = start + window_seconds
    return Bucket(f"{ends_at:012d}/{scope}/{window_seconds}/{subject}", ends_at)


def count(spool: Spool, counted: Bucket) -> int:
    return spool.counter(TABLE, counted.key.encode())


def add(batch: WriteBatch, buckets: Iterable[Bucket], delta: int) -> None:
    for counted in buckets:
        batch.add_counter(TABLE, counted.key.encode(), delta)


def drop(batch: WriteBatch, buckets: Iterable[Bucket]) -> None:
    for counted in buckets:
        batch.delete(TABLE, counted.key.encode())


def prune_expired(spool: Spool, batch: WriteBatch, now: float) -> None:
    """Delete a few counts whose window has ended (in `batch`)."""
    for key, _ in spool.scan(TABLE, limit=_PRUNED_PER_ATTEMPT):
        if int(key[:12]) > now:
            break
        batch.delete(TABLE, key)


def buckets_where(spool: Spool, scope: str, subject_matches: Callable[[str], bool]) -> list[str]:
    """The keys of every live count of `scope` whose subject `subject_matches`."""
    found: list[str] = []
    cursor: bytes | None = None
    while True:
        rows = spool.scan(TABLE, cursor=cursor, limit=_PAGE)
        for raw, _ in rows:
            key = raw.decode()
            _, key_scope, _, subject = key.split("/", 3)
            if key_scope == scope and subject_matches(subject):
                found.append(key)
        if len(rows) < _PAGE:
            return found
        cursor = rows[-1][0]


def drop_keys(batch: WriteBatch, keys: Iterable[str]) -> None:
    for key in keys:
        batch.delete(TABLE, key.encode())
