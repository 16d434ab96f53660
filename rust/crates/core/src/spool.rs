//! The durable spool: one LMDB environment under the data directory, owned by this module alone.
//!
//! It keeps message bodies, per-message delivery state, a due-time index with leases, and plain
//! key/value tables that the Python side uses for its own records. Every write is a [`Batch`] of
//! operations that commits atomically. Batches from concurrent callers are gathered by one
//! committer thread for a short window (or up to `max_batch` batches) and committed together with
//! one fsync ("group commit"); a caller learns of its batch only after the data is durable.
//!
//! Leases are due-index entries: handing a message to a worker moves its due time to the lease's
//! expiry, so a message whose worker died simply becomes due again when the lease runs out — also
//! across a restart, with nothing to recover on open.
//!
//! Intake keeps out of a reserve at the top of the map: a batch that enqueues a message is refused
//! ([`SpoolError::IntakeFull`]) once the live data would pass `map_size - reserve`, while every
//! other batch (a delivery outcome, an ack, a lease) may use the reserve. LMDB copies every page a
//! transaction touches, deletes included, so a map filled to the last page could no longer commit
//! the acks that would empty it; with the reserve, a full spool always drains.
//!
//! A full disk is met the same way. LMDB runs without a write map: with one, the file is a sparse
//! file mapped writable, and the first write into a page the filesystem cannot back kills the
//! process (SIGBUS); without, pages are written with `pwrite` at commit and a full disk is an
//! error that aborts the transaction. On top of that, [`DiskRoom`] keeps blocks allocated past
//! the data's end, and a batch that enqueues is refused ([`SpoolError::DiskFull`]) when the disk
//! cannot hold it beside that reserve, so outcomes and acks still commit on a full disk.

use std::collections::HashMap;
use std::ops::Bound;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use heed::types::Bytes;
use heed::{Database, Env, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};

use crate::disk_room::{self, DiskRoom};

/// Tables that belong to the spool itself; user tables may not start with `_`.
const BODIES: &str = "_bodies";
const STATES: &str = "_states";
const DUE: &str = "_due";

/// Upper bound on named tables, system ones included.
const MAX_TABLES: u32 = 128;

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("the spool is full (LMDB map size reached); raise spool.map_size or drain the queue")]
    MapFull,
    #[error(
        "the spool is full: {in_use} bytes in use, intake stops at {limit} (the rest of \
         spool.map_size is kept for delivery to drain it)"
    )]
    IntakeFull { in_use: u64, limit: u64 },
    #[error("the disk holding the spool is full ({0}); free space on it")]
    DiskFull(String),
    #[error("key already exists in table '{table}'")]
    KeyExists { table: String, key: Vec<u8> },
    #[error("'{table}' changed since it was read: another writer committed first")]
    Conflict { table: String, key: Vec<u8> },
    #[error("lease lost for message '{0}': it expired or another worker holds it")]
    LeaseLost(String),
    #[error("no message '{0}' in the spool")]
    NoSuchMessage(String),
    #[error("unknown spool table '{0}'")]
    UnknownTable(String),
    #[error("invalid spool request: {0}")]
    Invalid(String),
    #[error("the spool is closed")]
    Closed,
    #[error("spool storage error: {0}")]
    Storage(String),
    /// The table store's server cannot be reached (refused, lost, or lost during a COMMIT,
    /// whose outcome is then unknown); retry once it is back.
    #[error("the table store is unreachable: {0}")]
    Unavailable(String),
}

impl From<heed::Error> for SpoolError {
    fn from(err: heed::Error) -> Self {
        match err {
            heed::Error::Mdb(heed::MdbError::MapFull) => SpoolError::MapFull,
            heed::Error::Io(io) if disk_room::is_disk_full(&io) => {
                SpoolError::DiskFull(io.to_string())
            }
            // Only a failed write of a meta page (an I/O error, or a full copy-on-write
            // filesystem) leaves the environment unusable: a failed page write or fsync before
            // it aborts the transaction and nothing else. Reopening recovers the last commit.
            heed::Error::Mdb(heed::MdbError::Panic) => SpoolError::Storage(
                "a disk error kept the spool from recording a commit: that write was not kept, \
                 and none succeeds until Postwire is restarted, which reopens the spool at its \
                 last durable commit"
                    .into(),
            ),
            other => SpoolError::Storage(other.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, SpoolError>;

/// A key and its value, borrowed from a read transaction.
type Row<'txn> = (&'txn [u8], &'txn [u8]);

/// How the spool is opened.
#[derive(Debug, Clone)]
pub struct SpoolOptions {
    /// Size of the memory map in bytes: the most the spool can hold. Only address space is reserved.
    pub map_size: usize,
    /// How long the committer waits for more batches after the first one of a group.
    pub commit_window: Duration,
    /// The most batches one group commit gathers.
    pub max_batch: usize,
    /// The plain tables the caller uses; created on open when missing.
    pub tables: Vec<String>,
    /// Bytes at the top of the map that batches enqueueing messages may not use (see the module
    /// documentation); None: [`default_reserve`] of `map_size`.
    pub reserve: Option<usize>,
    /// Bytes of disk kept allocated past the data's end for writes that are not intake (see
    /// the module documentation); None: the intake reserve, at most [`MAX_DISK_RESERVE`].
    pub disk_reserve: Option<usize>,
}

impl SpoolOptions {
    /// The live data past which a batch that enqueues is refused.
    fn intake_limit(&self) -> u64 {
        let reserve = self
            .reserve
            .unwrap_or_else(|| default_reserve(self.map_size));
        (self.map_size - reserve.min(self.map_size)) as u64
    }

    fn disk_reserve(&self) -> u64 {
        let default = || {
            let reserve = self
                .reserve
                .unwrap_or_else(|| default_reserve(self.map_size));
            reserve.min(self.map_size / 2).min(MAX_DISK_RESERVE)
        };
        self.disk_reserve.unwrap_or_else(default) as u64
    }
}

/// The default disk reserve's ceiling: room for many groups of outcomes and acks (each dirties a
/// few megabytes at most), without taking the gigabyte an 8 GiB map's intake reserve would.
pub const MAX_DISK_RESERVE: usize = 64 << 20;

/// An eighth of the map, but at least 1 MiB (and at most half the map): a commit copies every
/// page it touches into fresh ones, and the pages it frees are reusable only two commits later,
/// so draining needs room for a few commits' copies — a group of hundreds of outcomes dirties
/// megabytes, whatever the map's size.
fn default_reserve(map_size: usize) -> usize {
    (map_size / 8).max(1 << 20).min(map_size / 2)
}

impl Default for SpoolOptions {
    fn default() -> Self {
        SpoolOptions {
            map_size: 1 << 30,
            commit_window: Duration::from_micros(1000),
            max_batch: 512,
            tables: Vec::new(),
            reserve: None,
            disk_reserve: None,
        }
    }
}

/// Delivery state of one spooled message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageState {
    /// When the message is next due (ms since the epoch); while leased, when the lease expires.
    pub due_at_ms: u64,
    /// Token of the current lease, 0 when never leased or after a reschedule.
    pub lease: u64,
    /// How many times the message was rescheduled after an attempt.
    pub attempts: u32,
    /// How many times the message was handed out, counting expired leases.
    pub deliveries: u32,
    pub enqueued_at_ms: u64,
    /// When the message was last handed out (0: never): the start of the attempt in progress
    /// while it is leased.
    pub leased_at_ms: u64,
}

const STATE_LEN: usize = 40;
/// States written before `leased_at_ms` existed; they read as never handed out since.
const STATE_LEN_V1: usize = 32;

impl MessageState {
    fn encode(&self) -> [u8; STATE_LEN] {
        let mut out = [0u8; STATE_LEN];
        out[0..8].copy_from_slice(&self.due_at_ms.to_le_bytes());
        out[8..16].copy_from_slice(&self.lease.to_le_bytes());
        out[16..20].copy_from_slice(&self.attempts.to_le_bytes());
        out[20..24].copy_from_slice(&self.deliveries.to_le_bytes());
        out[24..32].copy_from_slice(&self.enqueued_at_ms.to_le_bytes());
        out[32..40].copy_from_slice(&self.leased_at_ms.to_le_bytes());
        out
    }

    fn decode(raw: &[u8]) -> Result<Self> {
        if raw.len() != STATE_LEN && raw.len() != STATE_LEN_V1 {
            return Err(SpoolError::Storage("corrupt message state record".into()));
        }
        let u64_at = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().unwrap_or_default());
        let u32_at = |i: usize| u32::from_le_bytes(raw[i..i + 4].try_into().unwrap_or_default());
        Ok(MessageState {
            due_at_ms: u64_at(0),
            lease: u64_at(8),
            attempts: u32_at(16),
            deliveries: u32_at(20),
            enqueued_at_ms: u64_at(24),
            leased_at_ms: if raw.len() == STATE_LEN {
                u64_at(32)
            } else {
                0
            },
        })
    }

    fn is_leased_at(&self, now_ms: u64) -> bool {
        self.lease != 0 && self.due_at_ms > now_ms
    }
}

/// A message handed to a worker by [`Op::LeaseDue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    pub id: String,
    pub lease: u64,
    pub lease_expires_at_ms: u64,
    pub attempts: u32,
    /// 1 on the first hand-out; more means an earlier lease expired (a worker died or stalled).
    pub deliveries: u32,
    pub enqueued_at_ms: u64,
}

/// One operation of a write batch.
#[derive(Debug, Clone)]
pub enum Op {
    /// Set `key` in a plain table.
    Put {
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Set `key` only if absent; otherwise the whole batch fails with [`SpoolError::KeyExists`].
    Insert {
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Remove `key` from a plain table (absent is fine).
    Delete { table: String, key: Vec<u8> },
    /// Fail the batch with [`SpoolError::Conflict`] unless `key` holds exactly `expected`
    /// (`None`: is absent) as the batch commits: a compare-and-set in any process, checked
    /// against what the batches committed before it left, so a read-change-write loses no
    /// concurrent change. Writes nothing.
    Assert {
        table: String,
        key: Vec<u8>,
        expected: Option<Vec<u8>>,
    },
    /// Add `delta` to the counter at `key` in a plain table: an integer kept as ASCII decimal
    /// (so it reads as JSON), 0 when absent. Concurrent writers never lose each other's counts.
    AddCounter {
        table: String,
        key: Vec<u8>,
        delta: i64,
    },
    /// Store a new message, due at `due_at_ms`. An id already spooled fails the batch.
    Enqueue {
        id: String,
        body: Vec<u8>,
        due_at_ms: u64,
        now_ms: u64,
    },
    /// Move a message to a new due time. With a lease, the lease must still be held; without,
    /// the message must not be leased right now. `count_attempt` records a failed attempt.
    Reschedule {
        id: String,
        lease: Option<u64>,
        due_at_ms: u64,
        count_attempt: bool,
        now_ms: u64,
    },
    /// Finish a leased message: its body, state and index entry go.
    Ack { id: String, lease: u64 },
    /// Extend a lease still held (even if past its expiry, so long as nobody took it since) to
    /// `until_ms`, keeping its token: a message long in hand is not handed to another process.
    Renew {
        id: String,
        lease: u64,
        until_ms: u64,
    },
    /// Remove a message that is not leased right now (a cancelled scheduled email).
    Remove { id: String, now_ms: u64 },
    /// Hand out up to `limit` messages due at `now_ms`, each leased for `lease_ms`.
    LeaseDue {
        now_ms: u64,
        limit: usize,
        lease_ms: u64,
    },
    /// Make every leased message due at `now_ms` (on start-up, when this process alone delivers).
    ReleaseLeases { now_ms: u64 },
}

/// Operations that commit together or not at all.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub ops: Vec<Op>,
}

impl Batch {
    pub fn new() -> Self {
        Batch::default()
    }

    pub fn push(&mut self, op: Op) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Whether the batch takes in new mail: only such batches are held to the intake limits
    /// (the map's reserve and the disk's), so that outcomes and acks can always drain a spool.
    fn enqueues(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::Enqueue { .. }))
    }

    fn payload_len(&self) -> usize {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Put { value, .. } | Op::Insert { value, .. } => value.len(),
                Op::Enqueue { body, .. } => body.len(),
                _ => 0,
            })
            .sum()
    }
}

/// What a committed batch returns: the messages its `LeaseDue` operations handed out.
pub type BatchResult = Result<Vec<Leased>>;

/// A finished asynchronous batch, identified by the ticket [`Spool::submit`] returned.
#[derive(Debug)]
pub struct Completion {
    pub ticket: u64,
    pub result: BatchResult,
}

enum Reply {
    Ticket(u64),
    Channel(Sender<BatchResult>),
}

struct Job {
    batch: Batch,
    reply: Reply,
}

struct Tables {
    bodies: Database<Bytes, Bytes>,
    states: Database<Bytes, Bytes>,
    due: Database<Bytes, Bytes>,
    plain: HashMap<String, Database<Bytes, Bytes>>,
}

impl Tables {
    fn plain(&self, name: &str) -> Result<Database<Bytes, Bytes>> {
        self.plain
            .get(name)
            .copied()
            .ok_or_else(|| SpoolError::UnknownTable(name.to_string()))
    }
}

/// Finished asynchronous batches, and the socket that tells an event loop about them.
struct Completions {
    pending: Mutex<Vec<Completion>>,
    /// Written (one byte) when completions go from none to some, so an event loop can wait on
    /// the other end instead of a thread.
    wakeup: UnixStream,
}

struct Shared {
    env: Env<WithoutTls>,
    tables: Tables,
    intake_limit: u64,
    page_size: u64,
    /// Held open for the environment's life: closing any descriptor of `lock.mdb` would drop
    /// every POSIX lock this process holds on it, LMDB's shared lock on its first byte included,
    /// and the next process to open the spool would then take itself for the only one and
    /// reset the reader table and the writer's mutex under the processes already running.
    _lock_file: std::fs::File,
}

/// What the committer thread writes with.
struct Committer<'a> {
    shared: &'a Shared,
    room: &'a mut DiskRoom,
}

struct Running {
    shared: Arc<Shared>,
    jobs: Sender<Job>,
    committer: JoinHandle<()>,
}

/// The spool. Reads run on the caller's thread; writes go to the committer thread.
pub struct Spool {
    running: RwLock<Option<Running>>,
    completions: Arc<Completions>,
    next_ticket: AtomicU64,
    wakeup_reader: UnixStream,
}

impl Spool {
    /// Open (creating when missing) the spool in directory `path` and start its committer thread.
    pub fn open(path: &Path, options: &SpoolOptions) -> Result<Spool> {
        for name in &options.tables {
            if name.is_empty() || name.starts_with('_') {
                return Err(SpoolError::Invalid(format!(
                    "table name '{name}' is reserved"
                )));
            }
        }
        if options.tables.len() + 3 > MAX_TABLES as usize {
            return Err(SpoolError::Invalid(format!(
                "at most {} tables",
                MAX_TABLES - 3
            )));
        }
        std::fs::create_dir_all(path).map_err(|e| SpoolError::Storage(e.to_string()))?;
        let mut env_options = EnvOpenOptions::new().read_txn_without_tls();
        env_options
            .map_size(options.map_size)
            .max_dbs(MAX_TABLES)
            .max_readers(512);
        // No WRITE_MAP: see the module documentation (a full disk must be an error, not SIGBUS).
        // SAFETY: the environment is opened once per process (this module owns it) and its files
        // are not truncated or modified behind LMDB's back.
        let env = unsafe { env_options.open(path) }?;
        let mut wtxn = env.write_txn()?;
        let bodies = env.create_database(&mut wtxn, Some(BODIES))?;
        let states = env.create_database(&mut wtxn, Some(STATES))?;
        let due = env.create_database(&mut wtxn, Some(DUE))?;
        let mut plain = HashMap::new();
        for name in &options.tables {
            plain.insert(name.clone(), env.create_database(&mut wtxn, Some(name))?);
        }
        wtxn.commit()?;

        let io_error = |e: std::io::Error| SpoolError::Storage(e.to_string());
        let disk_error = |e: std::io::Error| SpoolError::from(heed::Error::Io(e));
        let lock_file = allocate_lock_file(&path.join("lock.mdb")).map_err(disk_error)?;
        let room =
            DiskRoom::open(&path.join("data.mdb"), options.disk_reserve()).map_err(io_error)?;
        let page_size = u64::from(env.stat().page_size);
        let (wakeup_reader, wakeup) = UnixStream::pair().map_err(io_error)?;
        wakeup_reader.set_nonblocking(true).map_err(io_error)?;
        wakeup.set_nonblocking(true).map_err(io_error)?;
        let completions = Arc::new(Completions {
            pending: Mutex::new(Vec::new()),
            wakeup,
        });
        let shared = Arc::new(Shared {
            env,
            tables: Tables {
                bodies,
                states,
                due,
                plain,
            },
            intake_limit: options.intake_limit(),
            page_size,
            _lock_file: lock_file,
        });
        let (jobs, receiver) = crossbeam_channel::unbounded();
        let committer = {
            let shared = Arc::clone(&shared);
            let completions = Arc::clone(&completions);
            let window = options.commit_window;
            let max_batch = options.max_batch.max(1);
            std::thread::Builder::new()
                .name("postwire-spool-commit".into())
                .spawn(move || {
                    let mut room = room;
                    let committer = Committer {
                        shared: &shared,
                        room: &mut room,
                    };
                    run_committer(committer, &completions, &receiver, window, max_batch);
                })
                .map_err(io_error)?
        };
        Ok(Spool {
            running: RwLock::new(Some(Running {
                shared,
                jobs,
                committer,
            })),
            completions,
            next_ticket: AtomicU64::new(1),
            wakeup_reader,
        })
    }

    fn with_open<T>(&self, f: impl FnOnce(&Running) -> Result<T>) -> Result<T> {
        let running = self.running.read().map_err(|_| SpoolError::Closed)?;
        f(running.as_ref().ok_or(SpoolError::Closed)?)
    }

    fn send(&self, job: Job) -> Result<()> {
        self.with_open(|running| running.jobs.send(job).map_err(|_| SpoolError::Closed))
    }

    /// Queue a batch for the next group commit and return its ticket at once. Its
    /// [`Completion`] appears in [`Spool::take_completions`] after the commit is durable.
    pub fn submit(&self, batch: Batch) -> Result<u64> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.send(Job {
            batch,
            reply: Reply::Ticket(ticket),
        })?;
        Ok(ticket)
    }

    /// Commit a batch through the group committer and block until it is durable.
    pub fn commit(&self, batch: Batch) -> BatchResult {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        self.send(Job {
            batch,
            reply: Reply::Channel(sender),
        })?;
        receiver.recv().map_err(|_| SpoolError::Closed)?
    }

    /// The file descriptor that becomes readable when completions are waiting.
    pub fn wakeup_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.wakeup_reader.as_raw_fd()
    }

    /// Every finished asynchronous batch since the last call. Drains the wake-up descriptor
    /// first, so a completion that arrives meanwhile always leaves it readable.
    pub fn take_completions(&self) -> Vec<Completion> {
        use std::io::Read;
        let mut sink = [0u8; 64];
        while let Ok(n) = (&self.wakeup_reader).read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        match self.completions.pending.lock() {
            Ok(mut pending) => std::mem::take(&mut *pending),
            Err(_) => Vec::new(),
        }
    }

    /// Stop accepting batches, commit what is queued, stop the committer thread and close the
    /// environment, so that it may be opened again. Idempotent.
    pub fn close(&self) {
        let running = match self.running.write() {
            Ok(mut running) => running.take(),
            Err(_) => None,
        };
        let Some(Running {
            shared,
            jobs,
            committer,
        }) = running
        else {
            return;
        };
        drop(jobs);
        let _ = committer.join();
        if let Ok(shared) = Arc::try_unwrap(shared) {
            shared.env.prepare_for_closing().wait();
        }
    }

    /// Run `f` in a read transaction while the spool is open.
    fn read<T>(&self, f: impl FnOnce(&Tables, &RoTxn<'_, WithoutTls>) -> Result<T>) -> Result<T> {
        self.with_open(|running| {
            let rtxn = running.shared.env.read_txn()?;
            f(&running.shared.tables, &rtxn)
        })
    }

    /// The value of `key` in a plain table.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(|tables, rtxn| Ok(tables.plain(table)?.get(rtxn, key)?.map(<[u8]>::to_vec)))
    }

    /// Up to `limit` entries of a plain table whose keys start with `prefix`, in key order (or
    /// reversed), strictly after the `cursor` key in that order when one is given.
    pub fn scan(
        &self,
        table: &str,
        prefix: &[u8],
        cursor: Option<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.read(|tables, rtxn| {
            let db = tables.plain(table)?;
            let prefix_end = prefix_successor(prefix);
            let lower = match (reverse, cursor) {
                (false, Some(c)) if c >= prefix => Bound::Excluded(c),
                // LMDB refuses empty keys even as range bounds.
                _ if prefix.is_empty() => Bound::Unbounded,
                _ => Bound::Included(prefix),
            };
            let upper = match (reverse, cursor, prefix_end.as_deref()) {
                (true, Some(c), end) if end.is_none_or(|e| c < e) => Bound::Excluded(c),
                (_, _, Some(end)) => Bound::Excluded(end),
                (_, _, None) => Bound::Unbounded,
            };
            let range = (lower, upper);
            let rows: Box<dyn Iterator<Item = heed::Result<Row<'_>>>> = if reverse {
                Box::new(db.rev_range(rtxn, &range)?)
            } else {
                Box::new(db.range(rtxn, &range)?)
            };
            let mut out = Vec::new();
            for row in rows.take(limit) {
                let (k, v) = row?;
                out.push((k.to_vec(), v.to_vec()));
            }
            Ok(out)
        })
    }

    /// The number of entries in a plain table.
    pub fn count(&self, table: &str) -> Result<u64> {
        self.read(|tables, rtxn| Ok(tables.plain(table)?.len(rtxn)?))
    }

    /// The bytes of a spooled message, exactly as enqueued.
    pub fn message_body(&self, id: &str) -> Result<Option<Vec<u8>>> {
        self.read(|tables, rtxn| {
            tables
                .bodies
                .get(rtxn, id.as_bytes())?
                .map(decode_body)
                .transpose()
        })
    }

    /// The delivery state of a spooled message.
    pub fn message_state(&self, id: &str) -> Result<Option<MessageState>> {
        self.read(|tables, rtxn| {
            tables
                .states
                .get(rtxn, id.as_bytes())?
                .map(MessageState::decode)
                .transpose()
        })
    }

    /// How many messages the spool holds.
    pub fn message_count(&self) -> Result<u64> {
        self.read(|tables, rtxn| Ok(tables.states.len(rtxn)?))
    }

    /// The earliest due time in the index (a lease's expiry counts), for sleeping until then.
    pub fn next_due_at(&self) -> Result<Option<u64>> {
        self.read(|tables, rtxn| Ok(tables.due.first(rtxn)?.map(|(k, _)| due_key_time(k))))
    }

    /// Write a consistent, compacted copy of the whole environment to the file `path` (created,
    /// or truncated), as of one read transaction: writers, in this process or another, go on
    /// meanwhile. The copy is a `data.mdb` that opens as a spool of its own.
    pub fn copy_to(&self, path: &Path) -> Result<()> {
        self.with_open(|running| {
            let file = running
                .shared
                .env
                .copy_to_path(path, heed::CompactionOption::Enabled)?;
            file.sync_all()
                .map_err(|e| SpoolError::from(heed::Error::Io(e)))
        })
    }

    /// Bytes of the map in use and the map's size.
    pub fn usage(&self) -> Result<(u64, u64)> {
        self.with_open(|running| {
            let env = &running.shared.env;
            Ok((env.non_free_pages_size()?, env.info().map_size as u64))
        })
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        self.close();
    }
}

/// The smallest key greater than every key that starts with `prefix` (None: no such bound).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// First byte of a stored body: how the rest is encoded.
const BODY_RAW: u8 = 0;
/// An LZ4 block preceded by the decoded length (u32, little-endian), as `lz4_flex` and the
/// `lz4.block` Python module both write it.
const BODY_LZ4: u8 = 1;

/// Compress a body when that saves at least an eighth; mail (text, HTML, base64) usually does.
/// Fewer bytes per message is more messages per fsync'd megabyte, and a body that shrinks under
/// half a page no longer needs overflow pages of its own.
fn encode_body(body: &[u8]) -> Vec<u8> {
    let compressed = lz4_flex::compress_prepend_size(body);
    let mut stored = Vec::with_capacity(1 + compressed.len().min(body.len()));
    if compressed.len() + compressed.len() / 7 < body.len() {
        stored.push(BODY_LZ4);
        stored.extend_from_slice(&compressed);
    } else {
        stored.push(BODY_RAW);
        stored.extend_from_slice(body);
    }
    stored
}

fn decode_body(stored: &[u8]) -> Result<Vec<u8>> {
    match stored.split_first() {
        Some((&BODY_RAW, body)) => Ok(body.to_vec()),
        Some((&BODY_LZ4, compressed)) => lz4_flex::decompress_size_prepended(compressed)
            .map_err(|e| SpoolError::Storage(format!("corrupt compressed body: {e}"))),
        _ => Err(SpoolError::Storage("corrupt body record".into())),
    }
}

fn due_key(due_at_ms: u64, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + id.len());
    key.extend_from_slice(&due_at_ms.to_be_bytes());
    key.extend_from_slice(id.as_bytes());
    key
}

fn due_key_time(key: &[u8]) -> u64 {
    key.get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

fn run_committer(
    mut committer: Committer<'_>,
    completions: &Completions,
    jobs: &Receiver<Job>,
    window: Duration,
    max_batch: usize,
) {
    while let Ok(first) = jobs.recv() {
        let mut group = vec![first];
        let deadline = Instant::now() + window;
        // Gather what is already queued, then wait out the window for more.
        while group.len() < max_batch {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(_) if window.is_zero() => break,
                Err(_) => match jobs.recv_deadline(deadline) {
                    Ok(job) => group.push(job),
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                },
            }
        }
        let results = commit_group(&mut committer, &group);
        deliver(completions, group, results);
    }
}

/// Apply every batch of a group in one transaction and commit it with one fsync. A batch whose
/// preconditions fail is skipped (it wrote nothing); a storage failure (a full map, say) aborts the
/// group, and then each batch is committed alone so that only the offending ones fail.
fn commit_group(committer: &mut Committer<'_>, group: &[Job]) -> Vec<BatchResult> {
    if group.len() > 1 {
        if let Ok(results) = try_commit(committer, group.iter().map(|j| &j.batch)) {
            return results;
        }
    }
    group
        .iter()
        .map(
            |job| match try_commit(committer, std::iter::once(&job.batch)) {
                Ok(mut results) => results.pop().unwrap_or_else(|| Ok(Vec::new())),
                Err(err) => Err(err),
            },
        )
        .collect()
}

fn try_commit<'a>(
    committer: &mut Committer<'_>,
    batches: impl Iterator<Item = &'a Batch>,
) -> Result<Vec<BatchResult>> {
    let shared = committer.shared;
    let mut wtxn = shared.env.write_txn()?;
    // The file's end as the last commit left it: this process holds the write lock, so no other
    // process moves it until this transaction ends.
    let end = (shared.env.info().last_page_number as u64 + 1) * shared.page_size;
    // Keep the reserve allocated for every group; on a full disk only intake must stop, and
    // whatever else this group writes goes into the reserve (or fails whole if that is spent).
    let _ = committer.room.ensure(end, 0);
    let mut adding = 0u64;
    let mut results = Vec::new();
    for batch in batches {
        let checked = check_batch(&shared.tables, &wtxn, batch)
            .and_then(|()| check_intake_room(shared, &wtxn, batch))
            .and_then(|()| check_disk_room(committer.room, end, adding, batch));
        match checked {
            Ok(()) => {
                results.push(Ok(apply_batch(&shared.tables, &mut wtxn, batch)?));
                adding += batch_size_estimate(batch);
            }
            Err(refusal) => results.push(Err(refusal)),
        }
    }
    wtxn.commit()?;
    Ok(results)
}

/// The preconditions of a batch, checked before any of its writes so a refusal leaves nothing.
fn check_batch(tables: &Tables, txn: &RwTxn<'_>, batch: &Batch) -> Result<()> {
    if batch.payload_len() > usize::MAX / 2 {
        return Err(SpoolError::Invalid("batch too large".into()));
    }
    for op in &batch.ops {
        match op {
            Op::Put { table, .. } | Op::Delete { table, .. } => {
                tables.plain(table)?;
            }
            Op::AddCounter { table, key, .. } => {
                if let Some(raw) = tables.plain(table)?.get(txn, key)? {
                    decode_counter(raw)?;
                }
            }
            Op::Assert {
                table,
                key,
                expected,
            } => {
                if tables.plain(table)?.get(txn, key)? != expected.as_deref() {
                    return Err(SpoolError::Conflict {
                        table: table.clone(),
                        key: key.clone(),
                    });
                }
            }
            Op::Insert { table, key, .. } => {
                if tables.plain(table)?.get(txn, key)?.is_some() {
                    return Err(SpoolError::KeyExists {
                        table: table.clone(),
                        key: key.clone(),
                    });
                }
            }
            Op::Enqueue { id, .. } => {
                if id.is_empty() {
                    return Err(SpoolError::Invalid("empty message id".into()));
                }
                if tables.states.get(txn, id.as_bytes())?.is_some() {
                    return Err(SpoolError::KeyExists {
                        table: STATES.into(),
                        key: id.clone().into_bytes(),
                    });
                }
            }
            Op::Reschedule {
                id, lease, now_ms, ..
            } => {
                let state = load_state(tables, txn, id)?;
                let held = match lease {
                    Some(token) => state.lease == *token && *token != 0,
                    None => !state.is_leased_at(*now_ms),
                };
                if !held {
                    return Err(SpoolError::LeaseLost(id.clone()));
                }
            }
            Op::Ack { id, lease } | Op::Renew { id, lease, .. } => {
                let state = load_state(tables, txn, id)?;
                if state.lease != *lease || *lease == 0 {
                    return Err(SpoolError::LeaseLost(id.clone()));
                }
            }
            Op::Remove { id, now_ms } => {
                if load_state(tables, txn, id)?.is_leased_at(*now_ms) {
                    return Err(SpoolError::LeaseLost(id.clone()));
                }
            }
            Op::LeaseDue { .. } | Op::ReleaseLeases { .. } => {}
        }
    }
    Ok(())
}

/// A batch that enqueues must leave the reserve free: the live data after it (this transaction's
/// earlier writes included) stays within the intake limit. Other batches are not checked.
fn check_intake_room(shared: &Shared, txn: &RwTxn<'_>, batch: &Batch) -> Result<()> {
    if !batch.enqueues() {
        return Ok(());
    }
    let in_use = live_bytes(&shared.tables, txn)?;
    let adding = batch_size_estimate(batch);
    if in_use.saturating_add(adding) > shared.intake_limit {
        return Err(SpoolError::IntakeFull {
            in_use,
            limit: shared.intake_limit,
        });
    }
    Ok(())
}

/// A batch that enqueues must find the disk able to hold it beyond the file's `end`, the group's
/// earlier batches (`adding` bytes) and the disk reserve. Other batches are not checked.
fn check_disk_room(room: &mut DiskRoom, end: u64, adding: u64, batch: &Batch) -> Result<()> {
    if !batch.enqueues() {
        return Ok(());
    }
    room.ensure(end, adding + batch_size_estimate(batch))
        .map_err(|err| SpoolError::DiskFull(err.to_string()))
}

/// What one operation's overhead is taken to be when estimating a batch's size.
const PAGE_ESTIMATE: usize = 4096;

/// An upper estimate of the bytes a batch adds: keys, state and index entries are small beside
/// bodies, so a page per operation covers them.
fn batch_size_estimate(batch: &Batch) -> u64 {
    (batch.payload_len() + batch.ops.len() * PAGE_ESTIMATE) as u64
}

/// LMDB's lock file is a sparse file mapped writable: a reader slot in a page never touched
/// before would fault on a full disk. Its blocks are allocated once, on open.
fn allocate_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let meta = file.metadata()?;
    match disk_room::allocate(&file, 0, meta.len()) {
        // Already whole (no holes): nothing could fault.
        Err(_) if meta.blocks() * 512 >= meta.len() => Ok(file),
        Ok(()) => Ok(file),
        Err(err) => Err(err),
    }
}

/// Bytes of the pages that hold data as `txn` sees it: every table's branch, leaf and overflow
/// pages. Free pages, reusable by later transactions, are not counted, so the figure falls as
/// delivered messages are acked.
fn live_bytes(tables: &Tables, txn: &RoTxn<'_, WithoutTls>) -> Result<u64> {
    let mut bytes = 0u64;
    let system = [&tables.bodies, &tables.states, &tables.due];
    for db in system.into_iter().chain(tables.plain.values()) {
        let stat = db.stat(txn)?;
        let pages = stat.branch_pages + stat.leaf_pages + stat.overflow_pages;
        bytes += pages as u64 * u64::from(stat.page_size);
    }
    Ok(bytes)
}

/// A counter's value: ASCII decimal, as `AddCounter` writes it.
pub fn decode_counter(raw: &[u8]) -> Result<i64> {
    std::str::from_utf8(raw)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            SpoolError::Invalid("a counter holds something other than an integer".into())
        })
}

fn load_state(tables: &Tables, txn: &RoTxn<'_, WithoutTls>, id: &str) -> Result<MessageState> {
    match tables.states.get(txn, id.as_bytes())? {
        Some(raw) => MessageState::decode(raw),
        None => Err(SpoolError::NoSuchMessage(id.to_string())),
    }
}

fn store_state(tables: &Tables, txn: &mut RwTxn<'_>, id: &str, state: &MessageState) -> Result<()> {
    tables.states.put(txn, id.as_bytes(), &state.encode())?;
    Ok(())
}

fn move_due(
    tables: &Tables,
    txn: &mut RwTxn<'_>,
    id: &str,
    from_ms: u64,
    to_ms: u64,
) -> Result<()> {
    tables.due.delete(txn, &due_key(from_ms, id))?;
    tables.due.put(txn, &due_key(to_ms, id), &[])?;
    Ok(())
}

fn apply_batch(tables: &Tables, txn: &mut RwTxn<'_>, batch: &Batch) -> Result<Vec<Leased>> {
    let mut leased = Vec::new();
    for op in &batch.ops {
        match op {
            Op::Put { table, key, value } | Op::Insert { table, key, value } => {
                tables.plain(table)?.put(txn, key, value)?;
            }
            Op::Delete { table, key } => {
                tables.plain(table)?.delete(txn, key)?;
            }
            Op::Assert { .. } => {}
            Op::AddCounter { table, key, delta } => {
                let db = tables.plain(table)?;
                let current = match db.get(txn, key)? {
                    Some(raw) => decode_counter(raw)?,
                    None => 0,
                };
                let next = current.saturating_add(*delta);
                db.put(txn, key, next.to_string().as_bytes())?;
            }
            Op::Enqueue {
                id,
                body,
                due_at_ms,
                now_ms,
            } => {
                tables.bodies.put(txn, id.as_bytes(), &encode_body(body))?;
                let state = MessageState {
                    due_at_ms: *due_at_ms,
                    lease: 0,
                    attempts: 0,
                    deliveries: 0,
                    enqueued_at_ms: *now_ms,
                    leased_at_ms: 0,
                };
                store_state(tables, txn, id, &state)?;
                tables.due.put(txn, &due_key(*due_at_ms, id), &[])?;
            }
            Op::Reschedule {
                id,
                due_at_ms,
                count_attempt,
                ..
            } => {
                let mut state = load_state(tables, txn, id)?;
                move_due(tables, txn, id, state.due_at_ms, *due_at_ms)?;
                state.due_at_ms = *due_at_ms;
                state.lease = 0;
                if *count_attempt {
                    state.attempts = state.attempts.saturating_add(1);
                }
                store_state(tables, txn, id, &state)?;
            }
            Op::Renew { id, until_ms, .. } => {
                let mut state = load_state(tables, txn, id)?;
                move_due(tables, txn, id, state.due_at_ms, *until_ms)?;
                state.due_at_ms = *until_ms;
                store_state(tables, txn, id, &state)?;
            }
            Op::Ack { id, .. } | Op::Remove { id, .. } => {
                let state = load_state(tables, txn, id)?;
                tables.due.delete(txn, &due_key(state.due_at_ms, id))?;
                tables.states.delete(txn, id.as_bytes())?;
                tables.bodies.delete(txn, id.as_bytes())?;
            }
            Op::LeaseDue {
                now_ms,
                limit,
                lease_ms,
            } => {
                lease_due(tables, txn, *now_ms, *limit, *lease_ms, &mut leased)?;
            }
            Op::ReleaseLeases { now_ms } => release_leases(tables, txn, *now_ms)?,
        }
    }
    Ok(leased)
}

fn lease_due(
    tables: &Tables,
    txn: &mut RwTxn<'_>,
    now_ms: u64,
    limit: usize,
    lease_ms: u64,
    out: &mut Vec<Leased>,
) -> Result<()> {
    let upper = (now_ms.saturating_add(1)).to_be_bytes();
    let range = (Bound::Unbounded, Bound::Excluded(&upper[..]));
    let mut due_ids = Vec::new();
    for entry in tables.due.range(txn, &range)? {
        if due_ids.len() >= limit {
            break;
        }
        let (key, _) = entry?;
        let id = std::str::from_utf8(&key[8..])
            .map_err(|_| SpoolError::Storage("corrupt due index key".into()))?;
        due_ids.push(id.to_string());
    }
    let expires = now_ms.saturating_add(lease_ms.max(1));
    for id in due_ids {
        let mut state = load_state(tables, txn, &id)?;
        move_due(tables, txn, &id, state.due_at_ms, expires)?;
        state.due_at_ms = expires;
        state.lease = new_lease_token();
        state.deliveries = state.deliveries.saturating_add(1);
        state.leased_at_ms = now_ms;
        store_state(tables, txn, &id, &state)?;
        out.push(Leased {
            id,
            lease: state.lease,
            lease_expires_at_ms: expires,
            attempts: state.attempts,
            deliveries: state.deliveries,
            enqueued_at_ms: state.enqueued_at_ms,
        });
    }
    Ok(())
}

fn release_leases(tables: &Tables, txn: &mut RwTxn<'_>, now_ms: u64) -> Result<()> {
    let mut held = Vec::new();
    for entry in tables.states.iter(txn)? {
        let (key, raw) = entry?;
        let state = MessageState::decode(raw)?;
        if state.is_leased_at(now_ms) {
            let id = String::from_utf8(key.to_vec())
                .map_err(|_| SpoolError::Storage("corrupt message id".into()))?;
            held.push((id, state));
        }
    }
    for (id, mut state) in held {
        move_due(tables, txn, &id, state.due_at_ms, now_ms)?;
        state.due_at_ms = now_ms;
        state.lease = 0;
        store_state(tables, txn, &id, &state)?;
    }
    Ok(())
}

fn new_lease_token() -> u64 {
    loop {
        let token: u64 = rand::random();
        if token != 0 {
            return token;
        }
    }
}

fn deliver(completions: &Completions, group: Vec<Job>, results: Vec<BatchResult>) {
    let mut tickets = Vec::new();
    for (job, result) in group.into_iter().zip(results) {
        match job.reply {
            Reply::Channel(sender) => {
                let _ = sender.send(result);
            }
            Reply::Ticket(ticket) => tickets.push(Completion { ticket, result }),
        }
    }
    if tickets.is_empty() {
        return;
    }
    let was_empty = match completions.pending.lock() {
        Ok(mut pending) => {
            let was_empty = pending.is_empty();
            pending.extend(tickets);
            was_empty
        }
        Err(_) => return,
    };
    if was_empty {
        use std::io::Write;
        // A full socket buffer already means "readable"; nothing is lost by skipping the byte.
        let _ = (&completions.wakeup).write(&[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Spool {
        let options = SpoolOptions {
            map_size: 64 << 20,
            tables: vec!["emails".into(), "idempotency".into()],
            ..SpoolOptions::default()
        };
        Spool::open(dir, &options).unwrap()
    }

    /// xorshift64 output: bytes LZ4 cannot shrink.
    fn incompressible(len: usize) -> Vec<u8> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect()
    }

    fn enqueue(id: &str, due: u64) -> Op {
        Op::Enqueue {
            id: id.into(),
            body: format!("body of {id}").into_bytes(),
            due_at_ms: due,
            now_ms: 1,
        }
    }

    fn put(table: &str, key: &str, value: &str) -> Op {
        Op::Put {
            table: table.into(),
            key: key.into(),
            value: value.into(),
        }
    }

    fn lease(spool: &Spool, now_ms: u64, lease_ms: u64) -> Vec<Leased> {
        let mut batch = Batch::new();
        batch.push(Op::LeaseDue {
            now_ms,
            limit: 100,
            lease_ms,
        });
        spool.commit(batch).unwrap()
    }

    fn add(key: &str, delta: i64) -> Op {
        Op::AddCounter {
            table: "emails".into(),
            key: key.into(),
            delta,
        }
    }

    #[test]
    fn counters_add_within_and_across_batches_and_refuse_non_integers() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut first = Batch::new();
        first.push(add("sent", 2)).push(add("sent", 3));
        spool.commit(first).unwrap();
        let mut second = Batch::new();
        second.push(add("sent", -1));
        spool.commit(second).unwrap();
        assert_eq!(spool.get("emails", b"sent").unwrap(), Some(b"4".to_vec()));

        let mut bad = Batch::new();
        bad.push(put("emails", "text", "not a number"));
        spool.commit(bad).unwrap();
        let mut refused = Batch::new();
        refused.push(add("sent", 1)).push(add("text", 1));
        assert!(matches!(spool.commit(refused), Err(SpoolError::Invalid(_))));
        assert_eq!(spool.get("emails", b"sent").unwrap(), Some(b"4".to_vec()));
    }

    #[test]
    fn copy_to_writes_a_compacted_spool_that_opens_with_everything_committed() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut batch = Batch::new();
        batch
            .push(enqueue("m1", 10))
            .push(put("emails", "e1", "first"));
        spool.commit(batch).unwrap();
        let mut deleted = Batch::new();
        deleted.push(Op::Delete {
            table: "emails".into(),
            key: b"e1".to_vec(),
        });
        deleted.push(put("emails", "e2", "second"));
        spool.commit(deleted).unwrap();

        let copy = crate::test_dir::tempdir().unwrap();
        spool.copy_to(&copy.path().join("data.mdb")).unwrap();
        spool
            .commit({
                let mut later = Batch::new();
                later.push(put("emails", "e3", "after the copy"));
                later
            })
            .unwrap();
        drop(spool);

        let restored = open(copy.path());
        assert_eq!(restored.get("emails", b"e1").unwrap(), None);
        assert_eq!(
            restored.get("emails", b"e2").unwrap(),
            Some(b"second".to_vec())
        );
        assert_eq!(restored.get("emails", b"e3").unwrap(), None);
        assert_eq!(
            restored.message_body("m1").unwrap(),
            Some(b"body of m1".to_vec())
        );
    }

    #[test]
    fn an_assertion_fails_its_batch_once_another_writer_changed_the_key() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let assert_value = |value: Option<&str>| Op::Assert {
            table: "emails".into(),
            key: b"e1".to_vec(),
            expected: value.map(|v| v.as_bytes().to_vec()),
        };
        let mut create = Batch::new();
        create
            .push(assert_value(None))
            .push(put("emails", "e1", "v1"));
        spool.commit(create).unwrap();

        // Two writers read v1; the first to commit wins, the second changes nothing.
        let mut first = Batch::new();
        first
            .push(assert_value(Some("v1")))
            .push(put("emails", "e1", "v2"));
        let mut second = Batch::new();
        second
            .push(assert_value(Some("v1")))
            .push(put("emails", "e1", "other"))
            .push(put("emails", "e2", "side effect"));
        spool.commit(first).unwrap();
        let err = spool.commit(second).unwrap_err();
        assert!(matches!(err, SpoolError::Conflict { ref table, .. } if table == "emails"));
        assert_eq!(spool.get("emails", b"e1").unwrap(), Some(b"v2".to_vec()));
        assert_eq!(spool.get("emails", b"e2").unwrap(), None);

        // Absent is a value too: a key created since fails an assertion that it is absent.
        let mut late = Batch::new();
        late.push(assert_value(None));
        assert!(matches!(
            spool.commit(late).unwrap_err(),
            SpoolError::Conflict { .. }
        ));
    }

    #[test]
    fn multi_put_commits_together_or_not_at_all() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut first = Batch::new();
        first
            .push(enqueue("m1", 10))
            .push(put("emails", "m1", "record"))
            .push(Op::Insert {
                table: "idempotency".into(),
                key: b"k".to_vec(),
                value: b"m1".to_vec(),
            });
        spool.commit(first).unwrap();

        let mut second = Batch::new();
        second
            .push(enqueue("m2", 10))
            .push(put("emails", "m2", "record"))
            .push(Op::Insert {
                table: "idempotency".into(),
                key: b"k".to_vec(),
                value: b"m2".to_vec(),
            });
        let err = spool.commit(second).unwrap_err();
        assert!(matches!(err, SpoolError::KeyExists { ref table, .. } if table == "idempotency"));
        assert_eq!(spool.get("emails", b"m2").unwrap(), None);
        assert_eq!(spool.message_body("m2").unwrap(), None);
        assert_eq!(
            spool.get("idempotency", b"k").unwrap(),
            Some(b"m1".to_vec())
        );
        assert_eq!(
            spool.message_body("m1").unwrap(),
            Some(b"body of m1".to_vec())
        );
        assert_eq!(spool.message_count().unwrap(), 1);
    }

    #[test]
    fn refused_batch_does_not_spoil_its_group() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = Arc::new(open(dir.path()));
        let mut seed = Batch::new();
        seed.push(Op::Insert {
            table: "idempotency".into(),
            key: b"taken".to_vec(),
            value: vec![],
        });
        spool.commit(seed).unwrap();
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let spool = Arc::clone(&spool);
                std::thread::spawn(move || {
                    let mut batch = Batch::new();
                    let key = if i % 4 == 0 {
                        b"taken".to_vec()
                    } else {
                        format!("k{i}").into_bytes()
                    };
                    batch
                        .push(put("emails", &format!("e{i}"), "x"))
                        .push(Op::Insert {
                            table: "idempotency".into(),
                            key,
                            value: vec![],
                        });
                    (i, spool.commit(batch).is_ok())
                })
            })
            .collect();
        for handle in handles {
            let (i, ok) = handle.join().unwrap();
            assert_eq!(ok, i % 4 != 0, "batch {i}");
            assert_eq!(
                spool
                    .get("emails", format!("e{i}").as_bytes())
                    .unwrap()
                    .is_some(),
                ok
            );
        }
    }

    #[test]
    fn renew_keeps_a_held_lease_from_being_handed_out_again() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut batch = Batch::new();
        batch.push(enqueue("a", 100));
        spool.commit(batch).unwrap();
        let held = lease(&spool, 100, 1_000).pop().unwrap();

        // Past its expiry but not taken since: the holder may still renew it.
        let mut renew = Batch::new();
        renew.push(Op::Renew {
            id: "a".into(),
            lease: held.lease,
            until_ms: 5_000,
        });
        spool.commit(renew).unwrap();
        assert!(lease(&spool, 2_000, 1_000).is_empty(), "renewed: not due");
        assert_eq!(spool.next_due_at().unwrap(), Some(5_000));

        // Once someone else holds it, the old token renews nothing.
        let taken = lease(&spool, 5_000, 1_000).pop().unwrap();
        assert_ne!(taken.lease, held.lease);
        let mut stale = Batch::new();
        stale.push(Op::Renew {
            id: "a".into(),
            lease: held.lease,
            until_ms: 9_000,
        });
        assert!(matches!(spool.commit(stale), Err(SpoolError::LeaseLost(_))));
        let mut ack = Batch::new();
        ack.push(Op::Ack {
            id: "a".into(),
            lease: taken.lease,
        });
        spool.commit(ack).unwrap();
    }

    #[test]
    fn leases_hand_out_due_messages_once_and_expire() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut batch = Batch::new();
        batch
            .push(enqueue("a", 100))
            .push(enqueue("b", 200))
            .push(enqueue("later", 10_000));
        spool.commit(batch).unwrap();

        let first = lease(&spool, 250, 1_000);
        let ids: Vec<_> = first.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(first
            .iter()
            .all(|l| l.deliveries == 1 && l.lease_expires_at_ms == 1_250));
        assert!(
            lease(&spool, 260, 1_000).is_empty(),
            "leased messages are not handed out twice"
        );
        assert_eq!(spool.next_due_at().unwrap(), Some(1_250));

        // After the lease runs out, the message is due again with a new token.
        let again = lease(&spool, 1_300, 1_000);
        assert_eq!(again.len(), 2);
        assert_eq!(again[0].deliveries, 2);
        assert_ne!(again[0].lease, first[0].lease);

        let mut stale_ack = Batch::new();
        stale_ack.push(Op::Ack {
            id: "a".into(),
            lease: first[0].lease,
        });
        assert!(matches!(
            spool.commit(stale_ack),
            Err(SpoolError::LeaseLost(_))
        ));

        let mut ack = Batch::new();
        ack.push(Op::Ack {
            id: "a".into(),
            lease: again[0].lease,
        });
        spool.commit(ack).unwrap();
        assert_eq!(spool.message_body("a").unwrap(), None);

        let mut retry = Batch::new();
        retry.push(Op::Reschedule {
            id: "b".into(),
            lease: Some(again[1].lease),
            due_at_ms: 5_000,
            count_attempt: true,
            now_ms: 1_300,
        });
        spool.commit(retry).unwrap();
        let state = spool.message_state("b").unwrap().unwrap();
        assert_eq!(
            (state.due_at_ms, state.lease, state.attempts),
            (5_000, 0, 1)
        );
        let due: Vec<_> = lease(&spool, 6_000, 10).into_iter().map(|l| l.id).collect();
        assert_eq!(due, ["b"]);
    }

    #[test]
    fn leases_survive_reopen_and_can_be_released() {
        let dir = crate::test_dir::tempdir().unwrap();
        {
            let spool = open(dir.path());
            let mut batch = Batch::new();
            batch.push(enqueue("x", 10)).push(enqueue("y", 10));
            spool.commit(batch).unwrap();
            assert_eq!(lease(&spool, 20, 60_000).len(), 2);
        }
        let spool = open(dir.path());
        assert!(
            lease(&spool, 30, 1_000).is_empty(),
            "unexpired leases stay held after reopen"
        );
        assert_eq!(
            lease(&spool, 60_020, 1_000).len(),
            2,
            "expired leases come back as due"
        );

        let mut release = Batch::new();
        release.push(Op::ReleaseLeases { now_ms: 60_030 });
        spool.commit(release).unwrap();
        assert_eq!(lease(&spool, 60_030, 1_000).len(), 2);
    }

    #[test]
    fn remove_and_unleased_reschedule_refuse_leased_messages() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut batch = Batch::new();
        batch.push(enqueue("s", 500));
        spool.commit(batch).unwrap();
        let mut move_it = Batch::new();
        move_it.push(Op::Reschedule {
            id: "s".into(),
            lease: None,
            due_at_ms: 50,
            count_attempt: false,
            now_ms: 10,
        });
        spool.commit(move_it).unwrap();
        assert_eq!(lease(&spool, 60, 1_000).len(), 1);
        let mut remove = Batch::new();
        remove.push(Op::Remove {
            id: "s".into(),
            now_ms: 70,
        });
        assert!(matches!(
            spool.commit(remove),
            Err(SpoolError::LeaseLost(_))
        ));
        let mut missing = Batch::new();
        missing.push(Op::Remove {
            id: "nope".into(),
            now_ms: 70,
        });
        assert!(matches!(
            spool.commit(missing),
            Err(SpoolError::NoSuchMessage(_))
        ));
    }

    #[test]
    fn bodies_come_back_exactly_compressed_or_not() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let text = b"Hello, this line repeats.\r\n".repeat(200);
        let noise = incompressible(5000);
        let mut batch = Batch::new();
        for (id, body) in [
            ("text", &text[..]),
            ("noise", &noise[..]),
            ("empty", &[][..]),
        ] {
            batch.push(Op::Enqueue {
                id: id.into(),
                body: body.to_vec(),
                due_at_ms: 0,
                now_ms: 0,
            });
        }
        spool.commit(batch).unwrap();
        assert_eq!(spool.message_body("text").unwrap().unwrap(), text);
        assert_eq!(spool.message_body("noise").unwrap().unwrap(), noise);
        assert_eq!(spool.message_body("empty").unwrap().unwrap(), b"");
        assert!(encode_body(&text).len() < text.len() / 4);
        assert_eq!(encode_body(&noise)[0], BODY_RAW);
    }

    #[test]
    fn scan_walks_prefixes_and_cursors_both_ways() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut batch = Batch::new();
        for key in ["t1/a", "t1/b", "t1/c", "t2/a", "t1\u{ff}"] {
            batch.push(put("emails", key, key));
        }
        spool.commit(batch).unwrap();
        let keys = |rows: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<String> {
            rows.into_iter()
                .map(|(k, _)| String::from_utf8(k).unwrap())
                .collect()
        };
        assert_eq!(
            keys(spool.scan("emails", b"t1/", None, false, 10).unwrap()),
            ["t1/a", "t1/b", "t1/c"]
        );
        assert_eq!(
            keys(spool.scan("emails", b"t1/", None, true, 2).unwrap()),
            ["t1/c", "t1/b"]
        );
        assert_eq!(
            keys(
                spool
                    .scan("emails", b"t1/", Some(b"t1/a"), false, 10)
                    .unwrap()
            ),
            ["t1/b", "t1/c"]
        );
        assert_eq!(
            keys(
                spool
                    .scan("emails", b"t1/", Some(b"t1/b"), true, 10)
                    .unwrap()
            ),
            ["t1/a"]
        );
        assert_eq!(
            keys(spool.scan("emails", b"", None, true, 1).unwrap()),
            ["t2/a"]
        );
        assert_eq!(
            keys(spool.scan("emails", b"", None, false, 1).unwrap()),
            ["t1/a"]
        );
        assert!(matches!(
            spool.get("nope", b"k"),
            Err(SpoolError::UnknownTable(_))
        ));
        assert_eq!(spool.count("emails").unwrap(), 5);
    }

    #[test]
    fn full_map_is_a_typed_error_and_fails_only_the_big_batch() {
        let dir = crate::test_dir::tempdir().unwrap();
        let options = SpoolOptions {
            map_size: 1 << 20,
            tables: vec!["emails".into()],
            ..SpoolOptions::default()
        };
        let spool = Arc::new(Spool::open(dir.path(), &options).unwrap());
        let big = std::thread::spawn({
            let spool = Arc::clone(&spool);
            move || {
                // Not an enqueue, so not stopped at the intake limit: it meets the map's end.
                let mut batch = Batch::new();
                batch.push(Op::Put {
                    table: "emails".into(),
                    key: b"big".to_vec(),
                    value: incompressible(4 << 20),
                });
                spool.commit(batch)
            }
        });
        let mut small = Batch::new();
        small.push(put("emails", "small", "fits"));
        spool.commit(small).unwrap();
        assert!(matches!(big.join().unwrap(), Err(SpoolError::MapFull)));
        assert_eq!(
            spool.get("emails", b"small").unwrap(),
            Some(b"fits".to_vec())
        );
        assert_eq!(spool.get("emails", b"big").unwrap(), None);
    }

    #[test]
    fn intake_stops_short_of_the_map_so_outcomes_and_acks_drain_it() {
        let dir = crate::test_dir::tempdir().unwrap();
        let options = SpoolOptions {
            map_size: 1 << 20,
            tables: vec!["emails".into()],
            ..SpoolOptions::default()
        };
        let spool = Spool::open(dir.path(), &options).unwrap();
        let enqueue_big = |id: &str| {
            let mut batch = Batch::new();
            batch.push(Op::Enqueue {
                id: id.into(),
                body: incompressible(2 << 10),
                due_at_ms: 0,
                now_ms: 0,
            });
            spool.commit(batch)
        };
        let mut accepted = 0;
        let refusal = loop {
            match enqueue_big(&format!("m{accepted}")) {
                Ok(_) => accepted += 1,
                Err(err) => break err,
            }
        };
        assert!(
            matches!(refusal, SpoolError::IntakeFull { in_use, limit }
                if limit == 1 << 19 && in_use <= limit),
            "{refusal:?}"
        );
        assert!(accepted > 50, "only {accepted} accepted");

        // Delivery's writes may use the reserve: every message is leased, its outcome recorded
        // with a record of some size, and acked.
        let mut all_due = Batch::new();
        all_due.push(Op::LeaseDue {
            now_ms: 1,
            limit: accepted,
            lease_ms: 60_000,
        });
        let leased = spool.commit(all_due).unwrap();
        assert_eq!(leased.len(), accepted);
        for message in &leased {
            let mut outcome = Batch::new();
            outcome
                .push(put("emails", &message.id, &"outcome ".repeat(40)))
                .push(Op::Ack {
                    id: message.id.clone(),
                    lease: message.lease,
                });
            spool.commit(outcome).unwrap();
        }
        assert_eq!(spool.message_count().unwrap(), 0);
        enqueue_big("after").expect("intake resumes once the spool has drained");
    }

    #[test]
    fn a_lease_records_when_it_began_and_old_states_still_read() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let mut batch = Batch::new();
        batch.push(enqueue("a", 10));
        spool.commit(batch).unwrap();
        assert_eq!(spool.message_state("a").unwrap().unwrap().leased_at_ms, 0);
        lease(&spool, 1_234, 60_000);
        let state = spool.message_state("a").unwrap().unwrap();
        assert_eq!((state.leased_at_ms, state.deliveries), (1_234, 1));

        let mut v1 = state.encode()[..STATE_LEN_V1].to_vec();
        v1[0..8].copy_from_slice(&7u64.to_le_bytes());
        let old = MessageState::decode(&v1).unwrap();
        assert_eq!((old.due_at_ms, old.deliveries, old.leased_at_ms), (7, 1, 0));
        assert!(MessageState::decode(&v1[..20]).is_err());
    }

    #[test]
    fn submitted_batches_complete_and_wake_the_reader() {
        let dir = crate::test_dir::tempdir().unwrap();
        let spool = open(dir.path());
        let tickets: Vec<u64> = (0..50)
            .map(|i| {
                let mut batch = Batch::new();
                batch.push(put("emails", &format!("k{i}"), "v"));
                spool.submit(batch).unwrap()
            })
            .collect();
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.len() < tickets.len() && Instant::now() < deadline {
            let mut fds = [libc_pollfd(spool.wakeup_fd())];
            poll(&mut fds, 100);
            seen.extend(spool.take_completions().into_iter().map(|c| {
                assert!(c.result.is_ok());
                c.ticket
            }));
        }
        seen.sort_unstable();
        assert_eq!(seen, tickets);
        spool.close();
        let mut late = Batch::new();
        late.push(put("emails", "late", "v"));
        assert!(matches!(spool.submit(late), Err(SpoolError::Closed)));
        assert!(matches!(
            spool.get("emails", b"k1"),
            Err(SpoolError::Closed)
        ));
        let reopened = open(dir.path());
        assert_eq!(reopened.count("emails").unwrap(), 50);
    }

    // Minimal poll(2) for the wake-up test, to avoid a libc dependency in the crate.
    #[repr(C)]
    struct PollFd {
        fd: i32,
        events: i16,
        revents: i16,
    }
    fn libc_pollfd(fd: i32) -> PollFd {
        PollFd {
            fd,
            events: 1,
            revents: 0,
        }
    }
    fn poll(fds: &mut [PollFd], timeout_ms: i32) {
        extern "C" {
            fn poll(fds: *mut PollFd, nfds: u64, timeout: i32) -> i32;
        }
        // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd-layout structs.
        unsafe { poll(fds.as_mut_ptr(), fds.len() as u64, timeout_ms) };
    }
}
