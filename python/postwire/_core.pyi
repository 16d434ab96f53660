"""Typed stub of `postwire._core`, the Rust extension. It is the documentation of the Rust API.

Errors raised by the extension are the classes of `postwire.errors`.
"""

import os

from postwire.errors import SpoolError

# --- ids ---------------------------------------------------------------------------------------

def new_id() -> str:
    """A fresh random UUID v4 string (the id format of every resource)."""

# --- mime --------------------------------------------------------------------------------------

# --- dkim --------------------------------------------------------------------------------------

# --- spool -------------------------------------------------------------------------------------

class WriteBatch:
    """Operations that commit together or not at all; consumed by `Spool.submit`/`Spool.commit`.

    Preconditions (an `insert` whose key exists, a lost lease, a missing message) are checked
    before any write of the batch, so a refused batch leaves nothing behind.
    """

    def __init__(self) -> None: ...
    def __len__(self) -> int: ...
    def put(self, table: str, key: bytes, value: bytes) -> None:
        """Set `key` in a plain table."""
    def insert(self, table: str, key: bytes, value: bytes) -> None:
        """Set `key` only if absent; else the batch fails with `KeyExistsError`."""
    def delete(self, table: str, key: bytes) -> None:
        """Remove `key` from a plain table; an absent key is fine."""
    def enqueue(self, id: str, body: bytes, due_at_ms: int, now_ms: int) -> None:
        """Store a new message due at `due_at_ms`; an id already spooled fails the batch."""
    def reschedule(
        self,
        id: str,
        due_at_ms: int,
        now_ms: int,
        *,
        lease: int | None = None,
        count_attempt: bool = False,
    ) -> None:
        """Move a message to a new due time, ending its lease.

        With `lease`, that lease must still be held; without, the message must not be leased
        now (`LeaseLostError` otherwise). `count_attempt` records a failed delivery attempt.
        """
    def ack(self, id: str, lease: int) -> None:
        """Finish a leased message: body, state and index entry are removed."""
    def remove(self, id: str, now_ms: int) -> None:
        """Remove a message that is not leased now (a cancelled scheduled email)."""
    def lease_due(self, now_ms: int, limit: int, lease_ms: int) -> None:
        """Hand out up to `limit` messages due at `now_ms`, each leased for `lease_ms`.

        A message whose lease expired is due again and is handed out anew with a new token.
        """
    def release_leases(self, now_ms: int) -> None:
        """Make every leased message due now (at start-up, when this process alone delivers)."""

class Leased:
    """A message handed out by `WriteBatch.lease_due`."""

    @property
    def id(self) -> str: ...
    @property
    def lease(self) -> int:
        """Token to present to `ack` or `reschedule`."""
    @property
    def lease_expires_at_ms(self) -> int: ...
    @property
    def attempts(self) -> int:
        """Failed attempts recorded by `reschedule(count_attempt=True)`."""
    @property
    def deliveries(self) -> int:
        """Hand-outs so far, this one included; above 1 means an earlier lease expired."""
    @property
    def enqueued_at_ms(self) -> int: ...

class MessageState:
    """Delivery state of one spooled message."""

    @property
    def due_at_ms(self) -> int:
        """When next due; while leased, when the lease expires."""
    @property
    def lease(self) -> int:
        """Current lease token; 0 when not leased since the last reschedule."""
    @property
    def attempts(self) -> int: ...
    @property
    def deliveries(self) -> int: ...
    @property
    def enqueued_at_ms(self) -> int: ...

class Spool:
    """The durable spool: one LMDB environment in directory `path`, owned by this object.

    Open it once per process. Reads run on the calling thread. Writes are gathered by a
    committer thread for up to `commit_window_us` (or `max_batch` batches) and committed with
    one fsync, GIL released. Errors are `postwire.errors.SpoolError` and its subclasses;
    `SpoolFullError` when the map (`map_size` bytes) is full.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tables: list[str],
        map_size: int = 1 << 30,
        commit_window_us: int = 1000,
        max_batch: int = 512,
    ) -> None:
        """Open or create the spool with the plain `tables` (names not starting with `_`)."""
    def submit(self, batch: WriteBatch) -> int:
        """Queue `batch` for group commit and return its ticket without waiting."""
    def commit(self, batch: WriteBatch) -> list[Leased]:
        """Commit `batch`, blocking (GIL released) until durable; raise on refusal."""
    def wakeup_fd(self) -> int:
        """A descriptor that turns readable when `take_completions` has something."""
    def take_completions(self) -> list[tuple[int, list[Leased], SpoolError | None]]:
        """Finished submitted batches as `(ticket, leased, error)`; `error` None on success."""
    def get(self, table: str, key: bytes) -> bytes | None: ...
    def scan(
        self,
        table: str,
        *,
        prefix: bytes = b"",
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        """Entries whose key starts with `prefix`, in key order or `reverse`d, strictly after
        `cursor` in that order, at most `limit`."""
    def count(self, table: str) -> int: ...
    def message_body(self, id: str) -> bytes | None: ...
    def message_state(self, id: str) -> MessageState | None: ...
    def message_count(self) -> int: ...
    def next_due_at(self) -> int | None:
        """Earliest due time in the index (lease expiries count), ms since the epoch."""
    def usage(self) -> tuple[int, int]:
        """`(bytes in use, map size)`."""
    def close(self) -> None:
        """Commit what is queued, stop the committer; later writes raise `SpoolError`."""
