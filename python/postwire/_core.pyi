"""Typed stub of `postwire._core`, the Rust extension. It is the documentation of the Rust API.

Errors raised by the extension are the classes of `postwire.errors`.
"""

import os
from collections.abc import Sequence
from typing import Final, Literal, TypeAlias, final

from postwire.errors import SpoolError

__all__ = [
    "TABLE_SCHEMA_VERSION",
    "Attachment",
    "DkimKey",
    "DkimSigner",
    "Leased",
    "MessageState",
    "PgTables",
    "Spool",
    "WriteBatch",
    "build_message",
    "data_faults",
    "generate_dkim_key",
    "mjml_to_html",
    "new_id",
    "stuff_data",
    "unstuff_data",
]

# --- ids ---------------------------------------------------------------------------------------

def new_id() -> str:
    """A fresh UUID v7 string, the id of every resource: opaque to clients, but it sorts in
    creation order, which keeps the spool's B-trees append-only."""

# --- smtp data ---------------------------------------------------------------------------------

def unstuff_data(raw: bytes) -> tuple[bytes, int]:
    """`raw` (a DATA transfer without its final ".\\r\\n") without its dot-stuffing: a "."
    starting a line is dropped (RFC 5321 §4.5.2). Lines end with CRLF only. Also the length of
    the longest line of `raw`, without its CRLF."""

def stuff_data(body: bytes) -> bytes:
    """The DATA transfer of `body`: a "." starting a line gets one more (RFC 5321 §4.5.2), a
    final CRLF is added when missing, then the terminating ".\\r\\n". Bare CR or LF pass as
    given (the body is signed)."""

def data_faults(message: bytes) -> tuple[bool, bool, bool]:
    """(a NUL octet is in `message`, a LF not preceded by CR is in `message`, a CR not
    followed by LF is in `message`)."""

# --- email layout ------------------------------------------------------------------------------

def mjml_to_html(mjml: str) -> str:
    """The email-safe HTML of the MJML document `mjml`, rendered by the `mrml` crate: tables
    with inline styles, a body that reflows on phones, no comments. Nothing outside is
    referenced: the web-font table is empty (no font `<link>`) and `mj-include` has no loader.
    Deterministic: the same MJML gives the same bytes. Runs with the GIL released.

    Attribute values are written back with Rust's debug formatting (a backslash doubled, U+2028
    or U+FE0F as `\\u{...}`): give them as printable ASCII, anything else as character
    references (`&#8232;`), which pass through unchanged. Texts are copied as they are.

    Raises `postwire.errors.MessageError` for MJML that cannot be parsed or rendered."""

# --- mime --------------------------------------------------------------------------------------

_Mailbox: TypeAlias = tuple[str | None, str]
"""`(display name or None, address)`. The REST layer parses `"Name <a@b>"` strings into these.

Addresses must be a dot-atom local part (ASCII `atext` or UTF-8, no quoted local parts), one
`@`, and a domain: a host name, an IDN (written in its punycode form, `xn--...`, per UTS 46),
or an address literal such as `[192.0.2.1]`. A non-ASCII local part is written as UTF-8
(RFC 6532) and needs SMTPUTF8 to be delivered. Non-ASCII display names are RFC 2047 encoded.
"""

@final
class Attachment:
    """A file carried by a message (immutable).

    `content_type` is `type/subtype` without parameters (case-insensitive, written in lower
    case, never `multipart/*`); when None it is guessed from the filename's extension, else
    `application/octet-stream`. With a `content_id` (with or without `<>`) the part is inline:
    it goes in `multipart/related` with the html, which refers to it as `cid:<content_id>`.
    A non-ASCII filename is written per RFC 2231. Filenames and content ids are at most 255
    octets. Checked when the message is built, not here.
    """

    def __new__(
        cls,
        content: bytes,
        filename: str | None = None,
        content_type: str | None = None,
        content_id: str | None = None,
    ) -> Attachment: ...
    @property
    def content(self) -> bytes: ...
    @property
    def filename(self) -> str | None: ...
    @property
    def content_type(self) -> str | None:
        """As given (None when it is to be guessed)."""
    @property
    def content_id(self) -> str | None: ...

def build_message(
    *,
    sender: _Mailbox,
    to: Sequence[_Mailbox] = (),
    cc: Sequence[_Mailbox] = (),
    bcc: Sequence[_Mailbox] = (),
    reply_to: Sequence[_Mailbox] = (),
    subject: str = "",
    text: str | None = None,
    html: str | None = None,
    attachments: Sequence[Attachment] = (),
    headers: Sequence[tuple[str, str]] = (),
    message_id: str | None = None,
    date: int | None = None,
    utc_offset_minutes: int = 0,
    boundary_seed: str | None = None,
) -> bytes:
    """Build one RFC 5322 message: CRLF lines of at most 998 octets, ending in CRLF.

    Headers, in order: From (`sender`), To, Cc, Reply-To (each left out when empty), Subject,
    Date, Message-ID, the custom `headers` in the order given, MIME-Version, Content-Type.
    `bcc` is validated like the other lists and never written (the envelope carries it).
    A non-ASCII subject (or one with a word too long to fold) is RFC 2047 encoded. A custom
    header value is written as given when ASCII (folded at whitespace, so structured values
    such as List-Unsubscribe survive) and RFC 2047 encoded otherwise.

    Body: `text` alone is text/plain, `html` alone text/html, both multipart/alternative.
    Attachments with a content id go with the html in multipart/related
    (`alternative[text, related[html, inline...]]`); the others make the message
    multipart/mixed (as do inline parts when there is no html). Neither text, html nor
    attachments gives an empty text/plain body. Text and html may not contain NUL; their bare
    CR and bare LF become CRLF; mail-builder picks 7bit, quoted-printable or base64 for them.
    A `text/*` attachment is 7bit when ASCII with lines of at most 998 octets, quoted-printable
    when at most one octet in six needs escaping, base64 otherwise, its line breaks made CRLF;
    one holding NUL or another control character but TAB is binary. Binary and non-text
    attachments are base64, their bytes exactly as given.

    Determinism, for golden-byte tests: `date` is Unix seconds shown at `utc_offset_minutes`
    (-1439..1439; the current time when `date` is None). `message_id` is taken with or without
    `<>` and must be `left@right`; when None it is `<{new_id()}@sender-domain>`. Every
    boundary is `{boundary_seed}_{n}`, n = 1, 2, 3 from the outermost multipart inwards; the seed is
    1-60 of `A-Z a-z 0-9 . _ -` and may not occur as `--{seed}` in the content; when None it
    is random.

    Raises:
        postwire.errors.HeaderInjectionError: a display name, address, subject, header name
            or value, message id, filename, content type, content id or boundary seed holds
            CR, LF or NUL. The message names the field (`to[1] address`, `header X-Tag value`).
        postwire.errors.MessageError: anything else malformed: other control characters, an
            invalid address or domain, a header name that is not printable ASCII without `:`
            and space, a custom header naming a structural header (From, To, Cc, Bcc, Reply-To,
            Subject, Date, Message-ID, MIME-Version, Content-Type, Content-Transfer-Encoding;
            case-insensitive: use the matching argument), a header word too long to fold into
            998 octets, a bad date, offset, content type, id or seed.
    """

# --- dkim --------------------------------------------------------------------------------------

@final
class DkimKey:
    """A fresh DKIM key pair, from `generate_dkim_key`. Its repr leaves the private key out."""

    @property
    def kind(self) -> Literal["rsa", "ed25519"]: ...
    @property
    def private_key_pem(self) -> str:
        """Unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`); keep it secret."""
    @property
    def dns_txt(self) -> str:
        """TXT value to publish at `<selector>._domainkey.<domain>`:
        `v=DKIM1; k=rsa; p=<base64 SubjectPublicKeyInfo>` or
        `v=DKIM1; k=ed25519; p=<base64 raw 32-byte key>` (RFC 8463). RSA values pass 255
        characters, so DNS publishes them as several strings of one TXT record."""

def generate_dkim_key(kind: Literal["rsa", "ed25519"] = "rsa", bits: int | None = None) -> DkimKey:
    """Generate a DKIM key, GIL released (RSA-2048 takes ~0.1-1 s, RSA-4096 seconds).

    `bits` is the RSA modulus size: 2048 when None, 1024..4096 accepted (keys under 2048 bits
    only for DNS hosts that cannot take long TXT records). It must be None for Ed25519.
    Raises `DkimError` for an unknown kind or a size out of range.
    """

@final
class DkimSigner:
    """A private key bound to a signing domain (`d=`) and selector (`s=`), parsed once.

    Signatures are RSA-SHA256 or Ed25519-SHA256 (by the key), canonicalization relaxed/relaxed,
    over those of From, To, Cc, Reply-To, Subject, Date, Message-ID, MIME-Version, Content-Type,
    List-Unsubscribe, List-Unsubscribe-Post that the message has (each instance of a repeated
    one); From is required. Safe to share between threads; `sign` releases the GIL.
    """

    def __new__(cls, private_key_pem: str, domain: str, selector: str) -> DkimSigner:
        """Parse the key: PKCS#8 `PRIVATE KEY` (RSA or Ed25519, as OpenSSL and
        `generate_dkim_key` write it) or PKCS#1 `RSA PRIVATE KEY`, RSA of 1024..4096 bits.

        Raises `DkimError` for anything else (bad PEM, public, encrypted or EC keys) and for a
        domain or selector that is not an ASCII DNS name (IDNs as punycode).
        """
    def sign(self, message: bytes, *, timestamp: int | None = None) -> bytes:
        """Return the `DKIM-Signature: ...\\r\\n` header (folded, CRLF) to prepend to `message`.

        `message` is the complete RFC 5322 message with CRLF line endings; 8-bit bytes are fine.
        `timestamp` (Unix seconds) sets `t=`; None uses the clock. Signing is deterministic, so
        a fixed timestamp gives golden bytes. Raises `DkimError` if the message has no From.
        """
    def sign_many(self, messages: Sequence[bytes], *, timestamp: int | None = None) -> list[bytes]:
        """`sign` of each of `messages`, in order, with the GIL released once for them all (a
        thread signing a batch retakes the GIL once). Raises `DkimError` for the first message
        that has no From."""
    @property
    def algorithm(self) -> Literal["rsa-sha256", "ed25519-sha256"]: ...
    @property
    def kind(self) -> Literal["rsa", "ed25519"]: ...
    @property
    def domain(self) -> str: ...
    @property
    def selector(self) -> str: ...
    @property
    def dns_txt(self) -> str:
        """The TXT value publishing this key's public half (as `DkimKey.dns_txt`)."""

# --- spool -------------------------------------------------------------------------------------

@final
class WriteBatch:
    """Operations that commit together or not at all; consumed by `Spool.submit`/`Spool.commit`.

    Preconditions (an `insert` whose key exists, a lost lease, a missing message) are checked
    before any write of the batch, so a refused batch leaves nothing behind.
    """

    def __new__(cls) -> WriteBatch: ...
    def __len__(self) -> int: ...
    def copy(self) -> WriteBatch:
        """A new batch with the same operations (a commit consumes the batch it is given)."""
    def split(self, local_tables: set[str]) -> tuple[WriteBatch, WriteBatch]:
        """Move the operations into `(shared, local)`: `local` takes the spool's own
        operations (messages, leases) and those on `local_tables`; `shared` the other table
        operations. This batch is left empty."""
    def table_writes(self) -> list[tuple[str, str, bytes, int]]:
        """The table writes in order, as `(kind, table, key, delta)`: kind `put`, `insert`,
        `delete` or `add_counter` (delta: the counter's, else 0); assertions and message
        operations left out."""
    def changes_the_queue(self) -> bool:
        """Whether the batch brings messages in or takes them out without delivering them
        (`enqueue`, `remove`, `reschedule` without a lease)."""
    def put(self, table: str, key: bytes, value: bytes) -> None:
        """Set `key` in a plain table."""
    def insert(self, table: str, key: bytes, value: bytes) -> None:
        """Set `key` only if absent; else the batch fails with `KeyExistsError`."""
    def delete(self, table: str, key: bytes) -> None:
        """Remove `key` from a plain table; an absent key is fine."""
    def assert_value(self, table: str, key: bytes, expected: bytes | None) -> None:
        """Fail the batch with `ConflictError` unless `key` holds exactly `expected` (None: is
        absent) when it commits, after every batch committed before it, in any process."""
    def add_counter(self, table: str, key: bytes, delta: int) -> None:
        """Add `delta` to the integer at `key` (ASCII decimal, 0 when absent) inside the commit:
        concurrent writers, in any process, never lose each other's counts. A value there that
        is not an integer fails the batch."""
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
    def renew(self, id: str, lease: int, until_ms: int) -> None:
        """Extend a lease still held (not taken by anyone since, even if past its expiry) to
        `until_ms`, keeping its token; fails the batch with `LeaseLostError` otherwise."""
    def remove(self, id: str, now_ms: int) -> None:
        """Remove a message that is not leased now (a cancelled scheduled email)."""
    def lease_due(self, now_ms: int, limit: int, lease_ms: int) -> None:
        """Hand out up to `limit` messages due at `now_ms`, each leased for `lease_ms`.

        A message whose lease expired is due again and is handed out anew with a new token.
        """
    def release_leases(self, now_ms: int) -> None:
        """Make every leased message due now (at start-up, when this process alone delivers)."""

@final
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

@final
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
    @property
    def leased_at_ms(self) -> int:
        """When last handed out (0: never): while leased, when the attempt in hand began."""

@final
class Spool:
    """The durable spool: one LMDB environment in directory `path`, owned by this object.

    Open it once per process. Reads run on the calling thread. Writes are gathered by a
    committer thread for up to `commit_window_us` (or `max_batch` batches) and committed with
    one fsync, GIL released. Errors are `postwire.errors.SpoolError` and its subclasses;
    `SpoolFullError` when the map (`map_size` bytes) is full, and for a batch that enqueues
    once the live data would reach the top `reserve` bytes of the map, which only other
    batches (delivery outcomes, acks, leases) may use, so that a full spool can drain. The same
    holds for the disk: the reserve (at most 64 MiB of it) stays allocated past the file's data,
    and a batch that enqueues gets `SpoolFullError` when the filesystem cannot hold it beside
    them; a full disk is always an error, never a crash.
    """

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        tables: list[str],
        map_size: int = ...,
        commit_window_us: int = 1000,
        max_batch: int = 512,
        reserve: int | None = None,
    ) -> Spool:
        """Open or create the spool with the plain `tables` (names not starting with `_`).

        `map_size` defaults to 1 GiB; `reserve` to an eighth of it, at least 1 MiB and at
        most half."""
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
        prefix: bytes = ...,
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        """Entries whose key starts with `prefix` (default: every key), in key order or
        `reverse`d, strictly after `cursor` in that order, at most `limit`."""
    def count(self, table: str) -> int: ...
    def message_body(self, id: str) -> bytes | None:
        """The message exactly as enqueued (bodies are stored LZ4-compressed when that pays)."""
    def message_state(self, id: str) -> MessageState | None: ...
    def message_count(self) -> int: ...
    def next_due_at(self) -> int | None:
        """Earliest due time in the index (lease expiries count), ms since the epoch."""
    def copy_to(self, path: str | os.PathLike[str]) -> None:
        """Write a consistent, compacted copy of the whole spool to the file `path` (a
        `data.mdb` that opens as a spool), as of one read transaction; writers in this process
        and others go on meanwhile. Raises `SpoolError` if it cannot be written."""
    def usage(self) -> tuple[int, int]:
        """`(bytes in use, map size)`."""
    def close(self) -> None:
        """Commit what is queued, stop the committer; later writes raise `SpoolError`."""

# --- table store on PostgreSQL -----------------------------------------------------------------

TABLE_SCHEMA_VERSION: Final[int]
"""The schema version `PgTables` creates; it refuses a database at a newer one."""

@final
class PgTables:
    """Postwire's plain tables in a PostgreSQL database (one SQL table per Postwire table,
    `k bytea PRIMARY KEY, v bytea NOT NULL`, in `schema`), for several nodes to share.

    Network work runs on a thread of the extension's own. Batches (table operations only:
    `put`, `insert`, `delete`, `assert_value`, `add_counter`; a spool operation fails the batch
    with `SpoolError`) queued while one commits are group-committed in one transaction; a
    refused one (`KeyExistsError`, `ConflictError`, a counter that is not an integer) is rolled
    back alone. `submit*` return a ticket at once; the answer comes in `take_completions`, and
    `wakeup_fd` turns readable when one waits. The other methods block, GIL released.

    An unreachable server raises `StoreUnavailableError` (for a COMMIT cut off, saying its
    outcome is unknown); connections are made again on the next request.
    """

    def __new__(
        cls,
        url: str,
        *,
        tables: list[str],
        schema: str = ...,
        read_connections: int = 2,
        max_batch: int = 512,
    ) -> PgTables:
        """Connect to `url` (`postgresql://user:password@host:port/database`), create the
        schema (default "postwire") and the tables that are missing, and check the schema's
        version (blocks)."""
    def submit(self, batch: WriteBatch) -> int:
        """Queue `batch` for group commit; its answer is None."""
    def submit_gets(self, requests: list[tuple[str, bytes]]) -> list[int]:
        """Queue reads of several `(table, key)` at once; their tickets, in order. Each answer
        is `bytes | None`."""
    def submit_scan(
        self,
        table: str,
        *,
        prefix: bytes = ...,
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> int:
        """Queue a scan, as `Spool.scan`; its answer is `list[tuple[bytes, bytes]]`."""
    def submit_count(self, table: str) -> int:
        """Queue a count of a table's rows; its answer is an `int`."""
    def wakeup_fd(self) -> int:
        """A descriptor that turns readable when `take_completions` has something."""
    def take_completions(self) -> list[tuple[int, object, SpoolError | None]]:
        """Finished requests as `(ticket, answer, error)`; `error` None on success."""
    def commit(self, batch: WriteBatch) -> None:
        """Commit `batch`, blocking until durable; raise on refusal."""
    def get(self, table: str, key: bytes) -> bytes | None: ...
    def scan(
        self,
        table: str,
        *,
        prefix: bytes = ...,
        cursor: bytes | None = None,
        reverse: bool = False,
        limit: int = 100,
    ) -> list[tuple[bytes, bytes]]:
        """Rows whose key starts with `prefix`, in key order (bytewise, as LMDB) or `reverse`d,
        strictly after `cursor` in that order, at most `limit`."""
    def count(self, table: str) -> int: ...
    def close(self) -> None:
        """Finish what is queued (its answers still come) and stop the thread; later calls
        raise `SpoolError`."""
