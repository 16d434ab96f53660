"""Committing a batch whose writes live in two stores: this node's spool and the table store.

With the tables in the spool's own LMDB environment (the embedded default) a batch is one
commit. With the tables elsewhere (PostgreSQL, or an LMDB environment of their own) a batch is
split (`WriteBatch.split`): the spool's part (messages, leases and the node's own tables,
`LOCAL_TABLES`) and the table store's part commit one after the other, in this order:

1. **The table store's part first.** Its refusals (an idempotency key taken, a guarded change's
   conflict, an insert of an existing key) decide before anything is spooled, so a refused
   batch leaves nothing anywhere, as a single commit would.
2. **Then the spool's part.** Only when it is durable does the caller reply.

A batch that brings messages in or takes them out (`WriteBatch.changes_the_queue`: intake,
a broadcast page, a cancel) must not leave its table writes behind if its spool part never
commits (refused: a full spool or disk; or the process killed in between), else an email would
show as accepted that can never be delivered. Its table part carries a **reservation**: a row
in `reservations` under this node, holding the undo of those writes (each key's value before,
each counter's delta negated); its spool part carries a marker in `reservations_done`. Then:

- the spool part refused: the undo commits at once (and the reservation goes with it);
- the spool part committed: the reservation and its marker are removed a moment later, in
  batches (`settle_reservations`);
- the process killed in between: the node's first process finds the reservation at its next
  start (`reconcile_reservations`), before any listener opens. With the marker, the batch
  completed: both go. Without it, its spool part never committed: the undo commits.

A batch that only records what happened to messages already spooled (delivery outcomes: an ack
or a reschedule with its lease, and events, counters, the email's `last_event`) needs no
reservation: killed between the two parts, the message is delivered again when its lease
expires, and its outcome recorded again (at least once, as the spool always promised).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import orjson
import trio

from postwire import _core
from postwire._core import Leased, WriteBatch
from postwire.errors import ConflictError, SpoolError, StoreUnavailableError


class Spool(Protocol):
    """What the protocol needs of the spool (`store/spool.py`, which imports this module)."""

    node_id: str
    settled: list[tuple[bytes, str]]
    undoing: list[tuple[bytes, bytes]]
    clock_ms: Callable[[], int]

    async def commit_local(self, batch: WriteBatch) -> list[Leased]: ...
    async def commit_shared(self, batch: WriteBatch) -> None: ...
    async def aget(self, table: str, key: bytes) -> bytes | None: ...
    async def ascan(
        self, table: str, *, prefix: bytes = b"", limit: int = 100
    ) -> list[tuple[bytes, bytes]]: ...
    def get(self, table: str, key: bytes) -> bytes | None: ...
    def scan(self, table: str, *, limit: int = 100) -> list[tuple[bytes, bytes]]: ...


log = logging.getLogger("postwire.store")

# Tables that stay in each node's spool whatever the table store: a spooled message's delivery
# record and the node's retry index go with the message; process metrics, the running service
# and the node's id describe this node; `reservations_done` marks spool parts that committed.
LOCAL_TABLES = frozenset(
    {"deliveries", "retry_waiting", "process_metrics", "running_service", "node"}
    | {"reservations_done"}
)
RESERVATIONS_TABLE = "reservations"
DONE_TABLE = "reservations_done"
NODE_TABLE = "node"
# Reservations removed in one commit, and how often a process removes those it completed.
SETTLE_BATCH = 512
SETTLE_INTERVAL_SECONDS = 0.5

UndoOp = tuple[str, str, bytes, bytes | None, int]


async def commit_split(spool: Spool, batch: WriteBatch) -> list[Leased]:
    """Commit `batch` across the spool and a table store of its own (the module's protocol)."""
    shared, local = batch.split(set(LOCAL_TABLES))
    if not len(local):
        await spool.commit_shared(shared)
        return []
    if not len(shared):
        return await spool.commit_local(local)
    if not local.changes_the_queue():
        await spool.commit_shared(shared)
        return await spool.commit_local(local)
    reservation = _core.new_id()
    undo = await undo_of(spool, shared)
    key = reservation_key(spool.node_id, spool.clock_ms(), reservation)
    encoded = encode_undo(undo)
    shared.put(RESERVATIONS_TABLE, key, encoded)
    local.put(DONE_TABLE, reservation.encode(), key)
    try:
        await spool.commit_shared(shared)
    except StoreUnavailableError:
        # Lost during its COMMIT, it may have landed: undo it if it did (the undo asserts that
        # its reservation is there, so it applies once, or not at all if nothing landed).
        spool.undoing.append((key, encoded))
        raise
    try:
        leased = await spool.commit_local(local)
    except SpoolError:  # refused: nothing of it was written, so its table writes go too
        with trio.CancelScope(shield=True):
            try:
                await _undo(spool, key, encoded)
            except SpoolError as error:  # unreachable: retried with the settled ones
                log.warning("could not undo a refused write yet (%s)", error)
                spool.undoing.append((key, encoded))
        raise
    spool.settled.append((key, reservation))
    return leased


def reservation_key(node_id: str, at_ms: int, reservation: str) -> bytes:
    return f"{node_id}/{at_ms:013d}/{reservation}".encode()


async def undo_of(spool: Spool, shared: WriteBatch) -> list[UndoOp]:
    """What puts the table store back as it was before `shared`: each key written gets its
    value before (read now: the batch's guarded change or unique keys keep it from moving
    meanwhile), each counter its delta negated."""
    undo: list[UndoOp] = []
    seen: set[tuple[str, bytes]] = set()
    for kind, table, key, delta in shared.table_writes():
        if kind == "add_counter":
            undo.append(("add_counter", table, key, None, -delta))
            continue
        if (table, key) in seen:
            continue
        seen.add((table, key))
        before = None if kind == "insert" else await spool.aget(table, key)
        undo.append(("restore", table, key, before, 0))
    return undo


def encode_undo(undo: Sequence[UndoOp]) -> bytes:
    return orjson.dumps(
        [
            [kind, table, _b64(key), None if value is None else _b64(value), delta]
            for kind, table, key, value, delta in undo
        ]
    )


def decode_undo(raw: bytes) -> list[UndoOp]:
    return [
        (kind, table, base64.b64decode(key), None if value is None else base64.b64decode(value), d)
        for kind, table, key, value, d in orjson.loads(raw)
    ]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


async def _undo(spool: Spool, key: bytes, encoded: bytes) -> None:
    """Commit the undo of reservation `key` with its removal, if the reservation is there (its
    batch landed and nobody undid or settled it since); else nothing."""
    batch = WriteBatch()
    batch.assert_value(RESERVATIONS_TABLE, key, encoded)
    for kind, table, row, value, delta in decode_undo(encoded):
        if kind == "add_counter":
            batch.add_counter(table, row, delta)
        elif value is None:
            batch.delete(table, row)
        else:
            batch.put(table, row, value)
    batch.delete(RESERVATIONS_TABLE, key)
    try:
        await spool.commit_shared(batch)
    except ConflictError as conflict:
        if conflict.table != RESERVATIONS_TABLE:
            raise


async def settle_reservations(spool: Spool) -> int:
    """Undo what waits to be undone, then remove the reservations, and their markers, of
    batches this process completed."""
    while spool.undoing:
        key, encoded = spool.undoing[0]
        await _undo(spool, key, encoded)
        spool.undoing.pop(0)
    settled = spool.settled[:SETTLE_BATCH]
    if not settled:
        return 0
    shared = WriteBatch()
    local = WriteBatch()
    for key, reservation in settled:
        shared.delete(RESERVATIONS_TABLE, key)
        local.delete(DONE_TABLE, reservation.encode())
    await spool.commit_shared(shared)  # first: a marker never outlives its reservation's need
    await spool.commit_local(local)
    del spool.settled[: len(settled)]
    return len(settled)


async def settle_forever(spool: Spool) -> None:
    """Settle completed reservations every `SETTLE_INTERVAL_SECONDS`; runs until cancelled. An
    unreachable table store only delays them."""
    while True:
        await trio.sleep(SETTLE_INTERVAL_SECONDS)
        try:
            await settle_reservations(spool)
        except SpoolError as error:
            log.debug("reservations not settled yet: %s", error)


async def reconcile_reservations(spool: Spool) -> tuple[int, int]:
    """Finish this node's batches that a stopped process left between its two commits: the
    node's first process calls it at start, before any other process of the node runs and
    before intake opens. Returns `(completed, undone)`."""
    completed = undone = 0
    prefix = f"{spool.node_id}/".encode()
    while rows := await spool.ascan(RESERVATIONS_TABLE, prefix=prefix, limit=SETTLE_BATCH):
        for key, raw in rows:
            reservation = key.rsplit(b"/", 1)[-1]
            if spool.get(DONE_TABLE, reservation) is not None:
                spool.settled.append((key, reservation.decode()))
                completed += 1
            else:
                await _undo(spool, key, raw)
                undone += 1
        await settle_reservations(spool)
    done_rows = spool.scan(DONE_TABLE, limit=1_000_000)
    if done_rows:  # markers whose reservation was removed before them
        batch = WriteBatch()
        for reservation, _ in done_rows:
            batch.delete(DONE_TABLE, reservation)
        await spool.commit_local(batch)
    if completed or undone:
        log.info(
            "interrupted writes: %d completed before the stop, %d undone (their spool part "
            "never committed, so nothing of them was acknowledged)",
            completed,
            undone,
        )
    return completed, undone
