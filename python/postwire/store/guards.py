"""Optimistic guards: read-change-write of records that stays exact across processes and nodes.

A guarded change reads what it needs, builds its batch and commits it; the commit carries an
assertion that no other guarded change of the same records committed since the change began,
and fails with `ConflictError` if one did, and then the change runs again from its first read.
No lock is held between processes, so it works the same on one machine or several, on either
backend of the table store:

    async for attempt in spool.guarded(contact_key(team, contact_id)):
        with attempt:
            record = CONTACTS.get(spool, key)  # read
            batch = WriteBatch()  # built anew on every attempt
            ...
            await spool.commit(batch)

Each guarded key hashes to one of `GUARD_SLOTS` version counters in the `guards` table; every
commit made inside the attempt (in this task or the tasks it starts) asserts the counters it
read and adds one to them. Two keys sharing a slot only ever retry each other, never miss a
conflict, and the table never holds more than `GUARD_SLOTS` rows. Within one process, a Trio
lock per slot lines up the tasks that want it, so retries happen only between processes.

The body of an attempt must be safe to run again: reads and in-memory work before its commits,
and a batch built inside it (a batch is consumed by its commit, even a refused one).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import NoReturn, Protocol

import trio

from postwire._core import WriteBatch
from postwire.errors import ConflictError, SpoolError


class Spool(Protocol):
    """What a guarded change needs of the spool (`store/spool.py`, which imports this module)."""

    slot_locks: dict[bytes, trio.Lock]

    async def aget(self, table: str, key: bytes) -> bytes | None: ...


GUARDS_TABLE = "guards"
GUARD_SLOTS = 1 << 16
# Attempts of one change before it gives up: only a storm of writers to the same records from
# other processes gets there (this process's own writers wait their turn on the slot's lock).
MAX_ATTEMPTS = 64
# The longest pause between attempts; each waits a random part of it, so racers spread out.
MAX_BACKOFF_SECONDS = 0.01


def guard_slot(key: str) -> bytes:
    """The `guards` row that stands for `key`."""
    return b"%d" % (zlib.crc32(key.encode()) % GUARD_SLOTS)


@dataclass(slots=True)
class _Held:
    """The guard slots a task's attempts hold, with the versions its commits must find."""

    spool: Spool
    versions: dict[bytes, bytes | None] = field(default_factory=dict)


_HELD: ContextVar[_Held | None] = ContextVar("postwire_guards_held", default=None)


def stamp(spool: Spool, batch: WriteBatch) -> _Held | None:
    """Add the current attempt's assertions and version bumps to `batch` (a commit made inside a
    guarded change); returns the holder to `advance` once the batch committed."""
    held = _HELD.get()
    if held is None or held.spool is not spool or not held.versions:
        return None
    for slot, version in held.versions.items():
        batch.assert_value(GUARDS_TABLE, slot, version)
        batch.add_counter(GUARDS_TABLE, slot, 1)
    return held


def advance(held: _Held) -> None:
    """The stamped batch committed: the next commit of the attempt finds the versions it set."""
    for slot, version in held.versions.items():
        held.versions[slot] = b"%d" % (int(version or b"0") + 1)


class Attempt:
    """One run of a guarded change: `with attempt:` around the body. A conflict ends the run and
    makes `guarded` run the body again; success, any other exception, a `return` or a `break`
    ends the change."""

    def __init__(self, change: guarded) -> None:
        self._change = change
        self.conflicted = False

    def __enter__(self) -> Attempt:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        change = self._change
        conflict = isinstance(error, ConflictError) and error.table == GUARDS_TABLE
        if change.outermost and conflict and change.attempts < MAX_ATTEMPTS:
            self.conflicted = True  # a nested change's conflict too: the whole change reruns
            return True
        change.finish()
        if change.outermost and conflict:
            raise SpoolError(
                f"gave up changing {', '.join(change.keys)} after {MAX_ATTEMPTS} attempts: "
                "other writers kept changing it first"
            ) from error
        return False


class guarded:
    """Attempts of a change of the records of `keys` (strings, or iterables of them), until one
    commits without conflict. Nested inside another guarded change of the same task, it adds
    its slots to that change for its duration, and a conflict runs the outer change again."""

    def __init__(self, spool: Spool, *keys: str | Iterable[str]) -> None:
        self.spool = spool
        self.keys = _flatten(keys)
        self.attempts = 0
        self.outermost = True
        self._slots = sorted({guard_slot(key) for key in self.keys})
        self._held: _Held | None = None
        self._token: Token[_Held | None] | None = None
        self._locked: list[tuple[bytes, trio.Lock]] = []
        self._last: Attempt | None = None
        self._finished = False

    def __aiter__(self) -> guarded:
        return self

    async def __anext__(self) -> Attempt:
        if self._finished:
            raise StopAsyncIteration
        try:
            if self._held is None:
                await self._begin()
            elif self._last is not None and self._last.conflicted:
                await trio.sleep(random.uniform(0, MAX_BACKOFF_SECONDS) * min(self.attempts, 4))
            assert self._held is not None
            if self.outermost:
                # Parked, not blocking: on PostgreSQL each read is a round trip, and a blocking
                # one would stall every other task of the process meanwhile.
                self._held.versions = {
                    s: await self.spool.aget(GUARDS_TABLE, s) for s in self._slots
                }
            self.attempts += 1
        except BaseException:
            self.finish()
            raise
        self._last = Attempt(self)
        return self._last

    async def _begin(self) -> None:
        outer = _HELD.get()
        if outer is not None and outer.spool is self.spool:
            self.outermost = False
            self._slots = [slot for slot in self._slots if slot not in outer.versions]
            self._held = outer
        else:
            self._held = _Held(self.spool)
            self._token = _HELD.set(self._held)
        locks = self.spool.slot_locks
        for slot in self._slots:  # ascending: no two tasks wait for each other in a circle
            lock = locks.setdefault(slot, trio.Lock())
            await lock.acquire()
            self._locked.append((slot, lock))
        if not self.outermost:
            for slot in self._slots:
                self._held.versions[slot] = await self.spool.aget(GUARDS_TABLE, slot)

    def finish(self) -> None:
        """Release this change's slots (it committed, failed, or left its body)."""
        if self._finished:
            return
        self._finished = True
        locks = self.spool.slot_locks
        for slot, lock in reversed(self._locked):
            lock.release()
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                locks.pop(slot, None)
            if not self.outermost and self._held is not None:
                self._held.versions.pop(slot, None)
        self._locked.clear()
        if self._token is not None:
            _HELD.reset(self._token)
            self._token = None


def _flatten(keys: tuple[str | Iterable[str], ...]) -> list[str]:
    flat: list[str] = []
    for key in keys:
        if isinstance(key, str):
            flat.append(key)
        else:
            flat.extend(key)
    return flat


def never_after_change() -> NoReturn:
    """Ends a function whose guarded change returns from inside its attempt: its attempts end in
    that return or in an error, which a type checker cannot see."""
    raise AssertionError("a guarded change ended without returning")
