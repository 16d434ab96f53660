"""Which processes of `postwire serve` run on this spool, and what they listen on: what
`postwire status` shows, read from another process. Table `meta`, `presence/<index>`.

Each service process writes its row once serving and renews it every `RENEW_SECONDS`; a clean
stop deletes it. A row not renewed for `STALE_AFTER_MS` (a process killed) is left out of
`live_processes`, and the first process drops every row of earlier runs as it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

RENEW_SECONDS: Final = 5.0
STALE_AFTER_MS: Final = int(3 * RENEW_SECONDS * 1000)
_PREFIX: Final = "presence/"


@dataclass(frozen=True, slots=True)
class ProcessPresence:
    index: int  # 0: the first process (API, dashboard, metrics); 1..: workers
    pid: int
    host: str
    version: str
    started_ms: int
    renewed_ms: int
    # Listener name -> the addresses it is bound to ("REST API" -> ["http://127.0.0.1:3000"]).
    listeners: dict[str, list[str]] = field(default_factory=dict)


PRESENCE: Final = Table("meta", ProcessPresence)


def _key(index: int) -> str:
    return f"{_PREFIX}{index:04d}"


async def put_presence(spool: Spool, presence: ProcessPresence) -> None:
    batch = WriteBatch()
    PRESENCE.put(batch, _key(presence.index), presence)
    await spool.commit(batch)


async def remove_presence(spool: Spool, index: int) -> None:
    batch = WriteBatch()
    PRESENCE.delete(batch, _key(index))
    await spool.commit(batch)


def presences(spool: Spool) -> list[ProcessPresence]:
    """Every row, live or stale, by process index."""
    return [row for _, row in PRESENCE.scan(spool, prefix=_PREFIX, limit=10_000)]


def live_processes(spool: Spool, now_ms: int) -> list[ProcessPresence]:
    """The rows renewed within `STALE_AFTER_MS`, by process index."""
    return [row for row in presences(spool) if now_ms - row.renewed_ms <= STALE_AFTER_MS]


async def forget_earlier_presences(spool: Spool) -> None:
    """Drop every row (the first process, before its workers start)."""
    rows = presences(spool)
    if rows:
        batch = WriteBatch()
        for row in rows:
            PRESENCE.delete(batch, _key(row.index))
        await spool.commit(batch)
