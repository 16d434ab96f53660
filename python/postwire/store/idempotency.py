"""Idempotency keys of the send endpoints (contract section 10).

A key is scoped to the team, the method and the endpoint. Its record commits in the same batch
as the emails it created, so after any crash either both exist or neither does; the record
holds the original response, returned again for the same body for 24 hours. A request still
running under the same key in this process gets 409 `concurrent_idempotent_requests`; one in
another process loses at commit (the record's insert fails) and is answered from the winner's
record.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from postwire._core import WriteBatch
from postwire.errors import ApiError, SpoolError
from postwire.store.spool import Spool
from postwire.store.tables import Table

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.services import ServiceDeps

log = logging.getLogger("postwire.idempotency")

RETENTION_MS = 24 * 3600 * 1000
SWEEP_INTERVAL_SECONDS = 3600.0
MAX_KEY_LENGTH = 256


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    fingerprint: str
    status: int
    response: dict[str, Any]
    created_at_ms: int


IDEMPOTENCY = Table("idempotency", IdempotencyRecord)


def validate_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ApiError(
            400,
            "invalid_idempotency_key",
            "Idempotency keys, if present, must have between 1 and 256 characters.",
        )
    return key


def body_fingerprint(body: Any) -> str:
    """sha256 hex of `body` as canonical JSON (sorted keys, no spaces, ASCII escapes, so even
    a lone surrogate encodes): bodies differing only in key order or spacing are the same."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class IdempotencyScope:
    """One key of one team on one endpoint; `storage_key` hides the raw key's bytes."""

    team_id: str
    endpoint: str
    key: str

    @property
    def storage_key(self) -> str:
        digest = hashlib.sha256(self.key.encode()).hexdigest()
        return f"{self.team_id}/{self.endpoint}/{digest}"


class IdempotencyKeys:
    """Look-up, in-flight guard and recording of idempotent requests."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self._in_flight: set[str] = set()

    def replay(
        self, scope: IdempotencyScope, fingerprint: str, now_ms: int
    ) -> IdempotencyRecord | None:
        """The stored outcome for this key and body, None if the key is unused (or expired);
        409 when the key was used with another body."""
        record = self.stored(scope, now_ms)
        if record is None:
            return None
        if record.fingerprint != fingerprint:
            raise ApiError(
                409,
                "invalid_idempotent_request",
                "This idempotency key has been used with this HTTP method and endpoint within "
                "the last 24 hours, but the request body was modified and doesn't match the "
                "original request.",
            )
        return record

    def stored(self, scope: IdempotencyScope, now_ms: int) -> IdempotencyRecord | None:
        record = IDEMPOTENCY.get(self.spool, scope.storage_key)
        if record is None or now_ms - record.created_at_ms >= RETENTION_MS:
            return None
        return record

    @contextmanager
    def in_flight(self, scope: IdempotencyScope) -> Iterator[None]:
        """Hold the key for the duration of one request."""
        if scope.storage_key in self._in_flight:
            raise ApiError(
                409,
                "concurrent_idempotent_requests",
                "There is another request in progress with the same idempotency key.",
            )
        self._in_flight.add(scope.storage_key)
        try:
            yield
        finally:
            self._in_flight.discard(scope.storage_key)

    def record(
        self,
        batch: WriteBatch,
        scope: IdempotencyScope,
        fingerprint: str,
        status: int,
        response: dict[str, Any],
        now_ms: int,
    ) -> None:
        """Add the key's record to `batch`: an insert, so a rival commit of the same key (in any
        process or node) fails the batch, and the request is answered as the rival was. Only an
        expired record is overwritten, and only if it is still the one read (an assertion): a
        record committed since this request looked for one is never overwritten."""
        record = IdempotencyRecord(fingerprint, status, response, now_ms)
        key = scope.storage_key.encode()
        before = self.spool.get(IDEMPOTENCY.name, key)
        if before is not None and now_ms - IDEMPOTENCY.decode(before).created_at_ms >= RETENTION_MS:
            batch.assert_value(IDEMPOTENCY.name, key, before)
            IDEMPOTENCY.put(batch, scope.storage_key, record)
        else:
            IDEMPOTENCY.insert(batch, scope.storage_key, record)


async def delete_expired(spool: Spool, now_ms: int, page: int = 1000) -> int:
    """Remove records older than the retention; return how many went. One commit per page."""
    removed = 0
    cursor: str | None = None
    while True:
        rows = IDEMPOTENCY.scan(spool, cursor=cursor, limit=page)
        if not rows:
            return removed
        batch = WriteBatch()
        for key, record in rows:
            if now_ms - record.created_at_ms >= RETENTION_MS:
                IDEMPOTENCY.delete(batch, key)
                removed += 1
        if len(batch):
            await spool.commit(batch)
        cursor = rows[-1][0]


async def serve_idempotency_sweeper(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Delete expired idempotency records every `SWEEP_INTERVAL_SECONDS` (expired ones are
    already ignored on look-up; this only reclaims their space). Returns when `stopping` is set;
    a sweep cancelled midway loses nothing, each page being its own commit."""
    task_status.started()
    while not deps.stopping.is_set():
        try:
            await delete_expired(deps.spool, deps.spool.clock_ms())
        except SpoolError as exc:  # full, say: the next sweep takes what is left
            log.warning("expired idempotency records were not deleted: %s", exc)
        with trio.move_on_after(SWEEP_INTERVAL_SECONDS):
            await deps.stopping.wait()
