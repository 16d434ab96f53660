"""The spool as Trio sees it: awaitable group commits over `postwire._core.Spool`.

The Rust core owns the LMDB environment and a committer thread that gathers concurrent batches
into one transaction and one fsync. `Spool.commit` submits a batch and sleeps until the core
reports it durable; one dispatcher task waits on the core's wake-up descriptor and wakes the
callers whose batches finished. No Trio worker thread is held per write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import outcome
import trio

from postwire import _core
from postwire._core import Leased, MessageState, WriteBatch
from postwire.errors import SpoolError, SpoolFullError
from postwire.metrics.counters import set_event_counting
from postwire.store import guards

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
)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the spool's notion of now unless a test injects another."""
    return time.time_ns() // 1_000_000


log = logging.getLogger("postwire.spool")

# A full spool or disk refuses every write that meets it: it is said once in this many seconds.
FULL_WARNING_INTERVAL_SECONDS = 60.0


class Spool:
    """Awaitable writes and direct reads of the durable spool.

    Reads (`get`, `scan`, `message_body`, ...) are memory-mapped look-ups done on the calling
    thread. Writes go through `commit`, which returns only once the batch is on disk.
    """

    def __init__(
        self,
        core: _core.Spool,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.core = core
        self.clock_ms = clock_ms
        # Tasks parked in `commit`, by ticket. Parking directly (rather than one trio.Event per
        # commit) halves the scheduler work on the hottest path of the service.
        self._waiting: dict[int, trio.lowlevel.Task] = {}
        # This process's tasks waiting for the same guard slot take turns here, so that guarded
        # changes retry only against other processes (`store/guards.py`).
        self.slot_locks: dict[bytes, trio.Lock] = {}
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
        ticket = self.core.submit(batch)
        self._waiting[ticket] = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            del self._waiting[ticket]
            return trio.lowlevel.Abort.SUCCEEDED

        leased: list[Leased] = await trio.lowlevel.wait_task_rescheduled(abort)
        if held is not None:
            guards.advance(held)
        return leased

    async def dispatch_completions(self) -> None:
        """Wake the callers of finished commits; runs until cancelled."""
        fd = self.core.wakeup_fd()
        while True:
            await trio.lowlevel.wait_readable(fd)
            self._wake(self.core.take_completions())

    def _wake(self, completions: list[tuple[int, list[Leased], SpoolError | None]]) -> None:
        for ticket, leased, error in completions:
            task = self._waiting.pop(ticket, None)
            if task is None:  # its caller was cancelled
                continue
            if isinstance(error, SpoolFullError):
                self._warn_full(error)
            result = outcome.Value(leased) if error is None else outcome.Error(error)
            trio.lowlevel.reschedule(task, result)

    def _warn_full(self, error: SpoolFullError) -> None:
        now = time.monotonic()
        if (
            self._full_warned_at is None
            or now - self._full_warned_at >= FULL_WARNING_INTERVAL_SECONDS
        ):
            self._full_warned_at = now
            log.warning("%s: writes are refused until there is room again", error)

    def get(self, table: str, key: bytes) -> bytes | None:
        return self.core.get(table, key)

    def scan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        return self.core.scan(table, prefix=prefix, cursor=cursor, reverse=reverse, limit=limit)

    def counter(self, table: str, key: bytes) -> int:
        """The integer `WriteBatch.add_counter` keeps at `key`; 0 before the first add."""
        raw = self.core.get(table, key)
        return 0 if raw is None else int(raw)

    def message_body(self, message_id: str) -> bytes | None:
        return self.core.message_body(message_id)

    def message_state(self, message_id: str) -> MessageState | None:
        return self.core.message_state(message_id)

    async def close(self) -> None:
        """Let the committer finish what is queued, wake its callers, and close the core."""
        self._closed = True
        await trio.to_thread.run_sync(self.core.close)
        self._wake(self.core.take_completions())


async def serve_spool(
    config: Config, *, task_status: trio.TaskStatus[Spool] = trio.TASK_STATUS_IGNORED
) -> None:
    """Own the spool under `config.data_dir / "spool"` for the life of the service.

    Opens (and so recovers) the LMDB environment, runs the completion dispatcher, and reports
    the `Spool` through `task_status` once ready. When cancelled, it commits what is queued and
    closes the environment; the supervisor cancels it last, after every service that writes.
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
    spool = Spool(core)
    set_event_counting(config.metrics.count_events)  # the metrics' counters live in this spool
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spool.dispatch_completions)
            task_status.started(spool)
            await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await spool.close()
