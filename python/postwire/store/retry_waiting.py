"""Messages waiting to be tried again, by recipient domain, oldest first: one empty row per
domain a retried message still has a recipient at, `<domain>/<enqueued at, ms>/<message id>`.

The delivery engine writes and removes the rows in the commits that change which recipients a
retried message waits on, beside the per-domain counts (`counters`), so how long a domain's
queue has been waiting is one seek however deep it is. Messages that never failed have none.
"""

from __future__ import annotations

from typing import Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool

TABLE: Final = "retry_waiting"


def waiting_key(domain: str, enqueued_at_ms: int, message_id: str) -> bytes:
    return f"{domain}/{enqueued_at_ms:013d}/{message_id}".encode()


def mark_waiting(
    batch: WriteBatch, domain: str, enqueued_at_ms: int, message_id: str, *, waiting: bool
) -> None:
    """The message enters (`waiting`) or leaves the domain's retry queue in `batch`."""
    key = waiting_key(domain, enqueued_at_ms, message_id)
    if waiting:
        batch.put(TABLE, key, b"")
    else:
        batch.delete(TABLE, key)


def oldest_waiting_ms(spool: Spool, domain: str) -> int | None:
    """When the domain's longest-waiting message was enqueued; None when none waits."""
    rows = spool.scan(TABLE, prefix=f"{domain}/".encode(), limit=1)
    if not rows:
        return None
    return int(rows[0][0].split(b"/")[-2])
