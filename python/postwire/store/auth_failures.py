"""Failed SMTP AUTH attempts, counted in the spool so that every process of the service shares
the count (a count per process gave an attacker one allowance per worker).

Two counts per minute: one per client source and credential (what locks a key being guessed
at, from where it is guessed), one per source alone (the ceiling that stops spraying many
credentials). Keys start with their window, so expired counts sort first and each new failure
deletes a few of them: the table holds little more than the current minute.
"""

from __future__ import annotations

from dataclasses import dataclass

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

WINDOW_MS = 60_000
# Expired counts deleted with each failure recorded: more than the two a failure adds.
_PRUNED_PER_FAILURE = 16


@dataclass(frozen=True, slots=True)
class FailureCount:
    count: int


@dataclass(frozen=True, slots=True)
class AuthFailures:
    """Failures in the current window: from a source, and from it with one credential."""

    from_source: int
    with_credential: int


AUTH_FAILURES = Table("auth_failures", FailureCount)


def _window(now_ms: int) -> str:
    return f"{now_ms - now_ms % WINDOW_MS:015d}"


def _keys(source: str, credential: str, now_ms: int) -> tuple[str, str]:
    window = _window(now_ms)
    return f"{window}/source/{source}", f"{window}/credential/{source}/{credential}"


def count_auth_failures(spool: Spool, source: str, credential: str, now_ms: int) -> AuthFailures:
    source_key, credential_key = _keys(source, credential, now_ms)
    counts = [AUTH_FAILURES.get(spool, key) for key in (source_key, credential_key)]
    from_source, with_credential = (0 if c is None else c.count for c in counts)
    return AuthFailures(from_source, with_credential)


async def record_auth_failure(spool: Spool, source: str, credential: str, now_ms: int) -> None:
    """Count one failure of `credential` from `source`; returns once it is committed."""
    source_key, credential_key = _keys(source, credential, now_ms)
    async for attempt in spool.guarded(source_key):  # both counts are the source's
        with attempt:
            failures = count_auth_failures(spool, source, credential, now_ms)
            batch = WriteBatch()
            AUTH_FAILURES.put(batch, source_key, FailureCount(failures.from_source + 1))
            AUTH_FAILURES.put(batch, credential_key, FailureCount(failures.with_credential + 1))
            current = _window(now_ms)
            for key, _ in AUTH_FAILURES.scan(spool, limit=_PRUNED_PER_FAILURE):
                if key < current:
                    AUTH_FAILURES.delete(batch, key)
            await spool.commit(batch)
