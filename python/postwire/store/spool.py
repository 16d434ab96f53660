"""The spool as Trio sees it: awaitable group commits over `postwire._core.Spool`.

The Rust core owns the LMDB environment and a committer thread that gathers concurrent batches
into one transaction and one fsync. `Spool.commit` submits a batch and sleeps until the core
reports it durable; one dispatcher task waits on the core's wake-up descriptor and wakes the
callers whose batches finished. No Trio worker thread is held per write.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import trio

from postwire import _core
from postwire._core import Leased, MessageState, WriteBatch
from postwire.errors import KeyExistsError, SpoolError, SpoolFullError
from postwire.metrics.counters import set_event_counting
from postwire.store import guards, two_stores
from postwire.store.ticket_waiters import RequestsTogether, TicketWaiters

if TYPE_CHECKING:
    from postwire.config import Config

# Every plain table the services keep in the spool; all are created when the spool opens.
TABLES: tuple[str, ...] = (
    "teams",
    "api_keys",
    "auth_failures",
    "domains",
    "emails",
    "deliveries",
    "attempts",
    "events",
    "idempotency",
    "suppressions",
    "webhooks",
    "outbox",
    "webhook_messages",
    "webhook_due",
    "meta",
    "applied_reports",
    "sandbox_inbox",
    # Audiences: contacts and their indexes, segments, topics, contact properties.
    "contacts",
    "contact_emails",
    "segments",
    "segment_members",
    "segment_deletions",
    "topics",
    "contact_properties",
    # CSV imports of contacts: the jobs and their uploaded files.
    "contact_imports",
    "contact_import_files",
    # Templates, their aliases and versions.
    "templates",
    "template_aliases",
    "template_versions",
    # Broadcasts: the records, their due index and per-recipient results.
    "broadcasts",
    "broadcast_due",
    "broadcast_recipients",
    # Integers kept with `WriteBatch.add_counter` (a broadcast's per-status counts, ...).
    "counters",
    # Dashboard accounts: users, their addresses, team memberships, invitations, sessions,
    # single-use links, sign-in and sign-up attempts, MFA devices, per-team SSO and its pending
    # logins.
    "users",
    "user_emails",
    "memberships",
    "invitations",
    "sessions",
    "auth_links",
    "login_attempts",
    "mfa_devices",
    "sso_configs",
    "sso_logins",
    # Secondary indexes of emails for the dashboard's filters (status, domain, API key, ...).
    "email_index",
    # The broadcast editor: block documents of broadcasts, each team's brand kit, uploaded images.
    "broadcast_documents",
    "brand_kits",
    "images",
    # Deliverability insights of each email, the queue of emails waiting for theirs (computed
    # off the send path) and of their rechecks against live DNS.
    "email_insights",
    "insights_due",
    # Per-domain health (bounce and complaint rates against mailbox providers' thresholds).
    "domain_health",
    # Operator metrics each process publishes for the Prometheus listener, and the messages
    # waiting to retry by recipient domain (the age of each domain's retry queue).
    "process_metrics",
    "retry_waiting",
    # Public links to view an email (POST /emails/{id}/share), by link and by email.
    "email_shares",
    # Which `postwire serve` runs on this data directory (its pid, host and addresses).
    "running_service",
    # Version counters of guarded changes (`store/guards.py`): a batch asserts the ones it read.
    "guards",
    # Batches committed across the spool and a table store apart from it (`store/two_stores.py`):
    # their undo until the spool's part is durable, the marker that it is, and the node's id.
    "reservations",
    "reservations_done",
    "node",
)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the spool's notion of now unless a test injects another."""
    return time.time_ns() // 1_000_000


log = logging.getLogger("postwire.spool")

# A full spool or disk refuses every write that meets it: it is said once in this many seconds.
FULL_WARNING_INTERVAL_SECONDS = 60.0


# A table store's core kept apart from the spool: PostgreSQL, or a second LMDB environment.
TablesCore = _core.PgTables | _core.Spool


class Spool:
    """Awaitable writes and direct reads of the durable spool and of the table store.

    The spool (`core`) is this node's LMDB environment: messages, their delivery queue and the
    node's own tables. The other tables are in `tables` when it is set (PostgreSQL, or an LMDB
    environment of their own), else in `core` too. Only this class knows which holds a table:
    reads go to it, and `commit` splits a batch between them (`two_stores`). Reads of LMDB are
    memory-mapped look-ups on the calling thread; `aget` and `ascan` never block on a network.
    Writes go through `commit`, which returns only once the batch is durable.
    """

    def __init__(
        self,
        core: _core.Spool,
        clock_ms: Callable[[], int] = wall_clock_ms,
        *,
        tables: TablesCore | None = None,
        node_id: str = "",
    ) -> None:
        self.core = core
        self.tables = tables
        self.node_id = node_id
        self.clock_ms = clock_ms
        # Tasks parked on commits, by ticket; parking directly (rather than one trio.Event per
        # commit) halves the scheduler work on the hottest path of the service.
        self._spooled = TicketWaiters()
        self._tabled = TicketWaiters()
        self._gets = (
            RequestsTogether(self._tabled, tables.submit_gets)
            if isinstance(tables, _core.PgTables)
            else None
        )
        # This process's tasks waiting for the same guard slot take turns here, so that guarded
        # changes retry only against other processes (`store/guards.py`).
        self.slot_locks: dict[bytes, trio.Lock] = {}
        # Reservations of batches this process completed, to remove (`two_stores`).
        self.settled: list[tuple[bytes, str]] = []
        # Reservations (key, undo) whose undo could not commit yet: retried with the settled.
        self.undoing: list[tuple[bytes, bytes]] = []
        self._closed = False
        self._full_warned_at: float | None = None

    def guarded(self, *keys: str | Iterable[str]) -> guards.guarded:
        """Attempts of a read-change-write of the records of `keys`, exact across processes and
        nodes: `async for attempt in spool.guarded(key): with attempt: ...` (`store/guards.py`)."""
        return guards.guarded(self, *keys)

    async def commit(self, batch: WriteBatch) -> list[Leased]:
        """Commit `batch` atomically; return the messages its lease operations handed out.

        Raises a `SpoolError` subclass when the batch was refused or not written. If the caller
        is cancelled while waiting, the batch may still commit.
        """
        if self._closed:
            raise SpoolError("the spool is closed")
        held = guards.stamp(self, batch)
        if self.tables is None:
            leased = await self.commit_local(batch)
        else:
            leased = await two_stores.commit_split(self, batch)
        if held is not None:
            guards.advance(held)
        return leased

    async def commit_local(self, batch: WriteBatch) -> list[Leased]:
        """Commit `batch` to this node's spool alone (`two_stores` splits batches)."""
        return cast(list[Leased], await self._spooled.wait(self.core.submit(batch)))

    async def commit_shared(self, batch: WriteBatch) -> None:
        """Commit `batch` (table operations) to the table store alone."""
        if self.tables is None:
            await self.commit_local(batch)
        else:
            await self._tabled.wait(self.tables.submit(batch))

    async def dispatch_completions(self) -> None:
        """Wake the callers of finished commits (and of the table store's reads); runs until
        cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._dispatch, self.core, self._spooled)
            if self.tables is not None:
                nursery.start_soon(self._dispatch, self.tables, self._tabled)
            if self._gets is not None:
                nursery.start_soon(self._gets.run)

    async def _dispatch(self, core: _core.Spool | TablesCore, waiters: TicketWaiters) -> None:
        fd = core.wakeup_fd()
        while True:
            await trio.lowlevel.wait_readable(fd)
            self._wake(core.take_completions(), waiters)

    def _wake(
        self, completions: Sequence[tuple[int, object, SpoolError | None]], waiters: TicketWaiters
    ) -> None:
        for ticket, answer, error in completions:
            if isinstance(error, SpoolFullError):
                self._warn_full(error)
            waiters.wake(ticket, answer, error)

    def _warn_full(self, error: SpoolFullError) -> None:
        now = time.monotonic()
        if (
            self._full_warned_at is None
            or now - self._full_warned_at >= FULL_WARNING_INTERVAL_SECONDS
        ):
            self._full_warned_at = now
            log.warning("%s: writes are refused until there is room again", error)

    def _holder(self, table: str) -> _core.Spool | TablesCore:
        if self.tables is None or table in two_stores.LOCAL_TABLES:
            return self.core
        return self.tables

    def get(self, table: str, key: bytes) -> bytes | None:
        return self._holder(table).get(table, key)

    def scan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        return self._holder(table).scan(
            table, prefix=prefix, cursor=cursor, reverse=reverse, limit=limit
        )

    async def aget(self, table: str, key: bytes) -> bytes | None:
        """`get`, parked rather than blocking while a table store on the network answers."""
        holder = self._holder(table)
        if self._gets is not None and holder is self.tables:
            return cast(bytes | None, await self._gets.ask((table, key)))
        return holder.get(table, key)

    async def ascan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        """`scan`, parked rather than blocking while a table store on the network answers."""
        holder = self._holder(table)
        if isinstance(holder, _core.PgTables):
            ticket = holder.submit_scan(
                table, prefix=prefix, cursor=cursor, reverse=reverse, limit=limit
            )
            return cast(list[tuple[bytes, bytes]], await self._tabled.wait(ticket))
        return holder.scan(table, prefix=prefix, cursor=cursor, reverse=reverse, limit=limit)

    async def acount(self, table: str) -> int:
        """`count`, parked rather than blocking while a table store on the network answers."""
        holder = self._holder(table)
        if isinstance(holder, _core.PgTables):
            return cast(int, await self._tabled.wait(holder.submit_count(table)))
        return holder.count(table)

    async def acounter(self, table: str, key: bytes) -> int:
        """`counter`, parked rather than blocking while a table store on the network answers."""
        raw = await self.aget(table, key)
        return 0 if raw is None else int(raw)

    def count(self, table: str) -> int:
        """How many rows `table` holds."""
        return self._holder(table).count(table)

    def counter(self, table: str, key: bytes) -> int:
        """The integer `WriteBatch.add_counter` keeps at `key`; 0 before the first add."""
        raw = self.get(table, key)
        return 0 if raw is None else int(raw)

    async def finish_interrupted_writes(self) -> tuple[int, int]:
        """Complete or undo the batches a stopped process of this node left between the table
        store and the spool (`two_stores.reconcile_reservations`): for the node's first process
        at start, alone on the node. Returns `(completed, undone)`."""
        return await two_stores.reconcile_reservations(self)

    def message_count(self) -> int:
        """Messages in this node's spool."""
        return self.core.message_count()

    def next_due_at(self) -> int | None:
        """When this node's next message is due (a lease's expiry counts), ms since the epoch."""
        return self.core.next_due_at()

    def usage(self) -> tuple[int, int]:
        """`(bytes in use, map size)` of this node's spool."""
        return self.core.usage()

    def copy_to(self, path: Path) -> None:
        """Write a consistent copy of this node's spool to the file `path` (`_core.Spool.copy_to`;
        blocks: call it in a thread)."""
        self.core.copy_to(path)

    def copy_tables_to(self, path: Path) -> bool:
        """Write a consistent copy of the tables' own LMDB environment to the file `path`; False
        (nothing written) when the tables share the spool's environment or are in PostgreSQL."""
        if not isinstance(self.tables, _core.Spool):
            return False
        self.tables.copy_to(path)
        return True

    def message_body(self, message_id: str) -> bytes | None:
        return self.core.message_body(message_id)

    def message_state(self, message_id: str) -> MessageState | None:
        return self.core.message_state(message_id)

    async def close(self) -> None:
        """Let the committers finish what is queued, wake their callers, and close the cores."""
        self._closed = True
        await trio.to_thread.run_sync(self.core.close)
        self._wake(self.core.take_completions(), self._spooled)
        if self.tables is not None:
            await trio.to_thread.run_sync(self.tables.close)
            self._wake(self.tables.take_completions(), self._tabled)


async def serve_spool(
    config: Config, *, task_status: trio.TaskStatus[Spool] = trio.TASK_STATUS_IGNORED
) -> None:
    """Own the spool under `config.data_dir / "spool"`, and the table store `config.store` names,
    for the life of the service.

    Opens (and so recovers) the LMDB environment and connects the table store, runs the
    completion dispatchers (and, with the tables apart, the removal of settled reservations),
    and reports the `Spool` through `task_status` once ready. When cancelled, it commits what
    is queued and closes both; the supervisor cancels it last, after every service that writes.
    """
    path = Path(config.data_dir) / "spool"
    core = await trio.to_thread.run_sync(
        lambda: _core.Spool(
            path,
            tables=list(TABLES),
            map_size=config.spool.map_size,
            commit_window_us=config.spool.commit_window_us,
            max_batch=config.spool.max_batch,
        )
    )
    try:
        tables = await trio.to_thread.run_sync(open_tables, config)
    except BaseException:
        core.close()
        raise
    spool = Spool(core, tables=tables)
    set_event_counting(config.metrics.count_events)  # the metrics' counters live in this spool
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spool.dispatch_completions)
            spool.node_id = await _node_id(spool)
            if tables is not None:
                nursery.start_soon(two_stores.settle_forever, spool)
            task_status.started(spool)
            await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await spool.close()


def shared_tables() -> list[str]:
    """The tables a table store apart from the spool holds."""
    return [table for table in TABLES if table not in two_stores.LOCAL_TABLES]


def open_tables(config: Config) -> TablesCore | None:
    """The table store `config.store` names, when it is not the spool's own environment."""
    store = config.store
    if store.backend == "postgresql":
        return _core.PgTables(store.url, tables=shared_tables())
    if not store.path:
        return None
    return _core.Spool(
        Path(config.data_dir) / store.path,
        tables=shared_tables(),
        map_size=config.spool.map_size,
        commit_window_us=config.spool.commit_window_us,
        max_batch=config.spool.max_batch,
    )


async def _node_id(spool: Spool) -> str:
    """This node's id, made when its spool is first opened: it names the node's reservations."""
    raw = spool.get(two_stores.NODE_TABLE, b"id")
    if raw is None:
        batch = WriteBatch()
        batch.insert(two_stores.NODE_TABLE, b"id", _core.new_id().encode())
        with contextlib.suppress(KeyExistsError):  # another process of the node made it first
            await spool.commit_local(batch)
        raw = spool.get(two_stores.NODE_TABLE, b"id")
        assert raw is not None
    return raw.decode()
