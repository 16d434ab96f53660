"""Failed SMTP AUTH counts in the spool: per source and credential, per source, per minute,
and expired minutes deleted as new failures come in."""

from __future__ import annotations

from pathlib import Path

import trio

from postwire import _core
from postwire.store.auth_failures import (
    AUTH_FAILURES,
    WINDOW_MS,
    AuthFailures,
    count_auth_failures,
    record_auth_failure,
)
from postwire.store.spool import TABLES, Spool

MINUTE = 1_700_000_040_000  # the start of a window


async def test_counts_per_source_and_credential_within_a_minute(tmp_path: Path) -> None:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        assert count_auth_failures(spool, "192.0.2.7", "k1", MINUTE) == AuthFailures(0, 0)
        # Concurrent failures are all counted (one read-modify-commit at a time).
        async with trio.open_nursery() as failing:
            for _ in range(3):
                failing.start_soon(record_auth_failure, spool, "192.0.2.7", "k1", MINUTE + 5)
        await record_auth_failure(spool, "192.0.2.7", "k2", MINUTE + 10)
        await record_auth_failure(spool, "198.51.100.1", "k1", MINUTE + 10)

        assert count_auth_failures(spool, "192.0.2.7", "k1", MINUTE + 20) == AuthFailures(4, 3)
        assert count_auth_failures(spool, "192.0.2.7", "k2", MINUTE + 20) == AuthFailures(4, 1)
        assert count_auth_failures(spool, "198.51.100.1", "k1", MINUTE) == AuthFailures(1, 1)
        next_minute = MINUTE + WINDOW_MS
        assert count_auth_failures(spool, "192.0.2.7", "k1", next_minute) == AuthFailures(0, 0)

        # A failure in a later minute deletes the expired counts.
        await record_auth_failure(spool, "203.0.113.9", "k3", next_minute)
        keys = [key for key, _ in AUTH_FAILURES.scan(spool)]
        assert len(keys) == 2 and all(key.startswith(f"{next_minute:015d}/") for key in keys)
        nursery.cancel_scope.cancel()
    await spool.close()
