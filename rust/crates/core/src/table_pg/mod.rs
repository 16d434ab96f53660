//! The table store on PostgreSQL: Postwire's plain tables (ordered byte keys and values, batches
//! that commit atomically, assertions, counters) kept in a PostgreSQL database instead of the
//! spool's LMDB environment, for several nodes to share.
//!
//! A tokio runtime of its own runs on one thread: a committer task group-commits the batches
//! that queue while it is busy (see [`commit`]), and each read runs as a task on a small pool of
//! connections. Callers never block on the network: [`PgTables::submit`] and the `submit_*`
//! reads return a ticket at once, and the answer appears in [`PgTables::take_completions`],
//! announced on the descriptor [`PgTables::wakeup_fd`], as the LMDB spool does it. Blocking
//! variants ([`PgTables::commit`], [`PgTables::get`], ...) exist for threads and tools.
//!
//! A server that cannot be reached fails requests with [`SpoolError::Unavailable`]; connections
//! are made again on the next request, so the store works again by itself when it is back.

mod commit;
mod connection;
mod merged;
mod read;
mod schema;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use crate::completion_queue::CompletionQueue;
use crate::spool::{Batch, SpoolError};
use connection::Pool;
pub use read::ScanRequest;
use schema::Tables;
pub use schema::SCHEMA_VERSION;

type Result<T> = std::result::Result<T, SpoolError>;

/// How to reach the database and what to keep there.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgresql://user:password@host:port/database` (libpq's URL or key=value form).
    pub url: String,
    /// The SQL schema holding the tables (created when missing).
    pub schema: String,
    /// Postwire's table names; each becomes a table of the schema.
    pub tables: Vec<String>,
    /// Connections for reads (each pipelines many); the committer has one of its own.
    pub read_connections: usize,
    /// At most this many batches share one transaction.
    pub max_batch: usize,
}

/// What a request answers.
#[derive(Debug)]
pub enum Answer {
    Committed,
    Value(Option<Vec<u8>>),
    Rows(Vec<(Vec<u8>, Vec<u8>)>),
    Count(u64),
}

pub type AnswerResult = Result<Answer>;

enum Request {
    Commit(Batch),
    Get { table: String, key: Vec<u8> },
    Scan(ScanRequest),
    Count { table: String },
}

enum Reply {
    Ticket(u64),
    Channel(crossbeam_channel::Sender<AnswerResult>),
}

struct Running {
    requests: mpsc::UnboundedSender<(Request, Reply)>,
    thread: JoinHandle<()>,
}

/// Everything the runtime's tasks share.
struct Shared {
    tables: Tables,
    readers: Pool,
    completions: Arc<CompletionQueue<AnswerResult>>,
}

impl Shared {
    fn answer(&self, reply: Reply, result: AnswerResult) {
        match reply {
            Reply::Ticket(ticket) => self.completions.push(ticket, result),
            // A blocking caller that went away no longer wants it.
            Reply::Channel(sender) => drop(sender.send(result)),
        }
    }
}

pub struct PgTables {
    running: Mutex<Option<Running>>,
    completions: Arc<CompletionQueue<AnswerResult>>,
    next_ticket: AtomicU64,
}

impl PgTables {
    /// Connect, create the schema and tables that are missing (checking the schema's version),
    /// and start the runtime thread. Blocks until done.
    pub fn open(options: &PgOptions) -> Result<PgTables> {
        let tables = Tables::new(&options.schema, &options.tables)?;
        let readers = Pool::new(&options.url, options.read_connections)?;
        let committer = Pool::new(&options.url, 1)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SpoolError::Storage(format!("cannot start the runtime: {e}")))?;
        runtime.block_on(async { tables.create(&*committer.get().await?).await })?;
        let completions =
            Arc::new(CompletionQueue::new().map_err(|e| SpoolError::Storage(e.to_string()))?);
        let shared = Arc::new(Shared {
            tables,
            readers,
            completions: Arc::clone(&completions),
        });
        let (requests, inbox) = mpsc::unbounded_channel();
        let max_batch = options.max_batch.max(1);
        let thread = std::thread::Builder::new()
            .name("postwire-table-pg".into())
            .spawn(move || {
                yield_to_callers();
                runtime.block_on(serve(shared, committer, inbox, max_batch))
            })
            .map_err(|e| SpoolError::Storage(e.to_string()))?;
        Ok(PgTables {
            running: Mutex::new(Some(Running { requests, thread })),
            completions,
            next_ticket: AtomicU64::new(1),
        })
    }

    fn send(&self, request: Request, reply: Reply) -> Result<()> {
        let running = self.running.lock().map_err(|_| SpoolError::Closed)?;
        let running = running.as_ref().ok_or(SpoolError::Closed)?;
        running
            .requests
            .send((request, reply))
            .map_err(|_| SpoolError::Closed)
    }

    fn submit_request(&self, request: Request) -> Result<u64> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.send(request, Reply::Ticket(ticket))?;
        Ok(ticket)
    }

    fn wait(&self, request: Request) -> AnswerResult {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        self.send(request, Reply::Channel(sender))?;
        receiver.recv().map_err(|_| SpoolError::Closed)?
    }

    /// Queue a batch for the next group commit; its [`Answer::Committed`] (or error) comes in
    /// the completions under the returned ticket.
    pub fn submit(&self, batch: Batch) -> Result<u64> {
        self.submit_request(Request::Commit(batch))
    }

    /// Queue reads of several keys at once (the runtime, woken by the first, finds the others
    /// waiting); their tickets, in order.
    pub fn submit_gets(&self, requests: Vec<(String, Vec<u8>)>) -> Result<Vec<u64>> {
        requests
            .into_iter()
            .map(|(table, key)| self.submit_request(Request::Get { table, key }))
            .collect()
    }

    pub fn submit_scan(&self, request: ScanRequest) -> Result<u64> {
        self.submit_request(Request::Scan(request))
    }

    pub fn submit_count(&self, table: String) -> Result<u64> {
        self.submit_request(Request::Count { table })
    }

    /// Commit a batch and block until it is durable (or refused).
    pub fn commit(&self, batch: Batch) -> Result<()> {
        self.wait(Request::Commit(batch)).map(|_| ())
    }

    pub fn get(&self, table: String, key: Vec<u8>) -> Result<Option<Vec<u8>>> {
        match self.wait(Request::Get { table, key })? {
            Answer::Value(value) => Ok(value),
            other => Err(unexpected(other)),
        }
    }

    pub fn scan(&self, request: ScanRequest) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self.wait(Request::Scan(request))? {
            Answer::Rows(rows) => Ok(rows),
            other => Err(unexpected(other)),
        }
    }

    pub fn count(&self, table: String) -> Result<u64> {
        match self.wait(Request::Count { table })? {
            Answer::Count(count) => Ok(count),
            other => Err(unexpected(other)),
        }
    }

    /// The descriptor that turns readable when completions wait.
    pub fn wakeup_fd(&self) -> std::os::fd::RawFd {
        self.completions.wakeup_fd()
    }

    /// Every finished submitted request since the last call, as `(ticket, result)`.
    pub fn take_completions(&self) -> Vec<(u64, AnswerResult)> {
        self.completions.take()
    }

    /// Stop taking requests, finish those queued (their answers still come), and stop the
    /// runtime thread. Idempotent.
    pub fn close(&self) {
        let running = match self.running.lock() {
            Ok(mut running) => running.take(),
            Err(_) => None,
        };
        if let Some(Running { requests, thread }) = running {
            drop(requests);
            let _ = thread.join();
        }
    }
}

impl Drop for PgTables {
    fn drop(&mut self) {
        self.close();
    }
}

/// Lets the runtime thread be woken without preempting the thread that woke it: a caller
/// queueing requests keeps its core (and Python's lock) until it parks, and the runtime then
/// finds several requests waiting and sends them together. (`SCHED_BATCH`: same priority, only
/// a milder claim at wake-up.)
fn yield_to_callers() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: plain syscall on the calling thread with a valid parameter; failing is harmless.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
}

fn unexpected(answer: Answer) -> SpoolError {
    SpoolError::Storage(format!("unexpected answer {answer:?}"))
}

/// The runtime's main task: hands batches to the committer and starts a task per read (gets
/// of one table that arrived together share one), until the store is closed and everything in
/// flight has been answered.
async fn serve(
    shared: Arc<Shared>,
    committer: Pool,
    mut inbox: mpsc::UnboundedReceiver<(Request, Reply)>,
    max_batch: usize,
) {
    let (batches, queued) = mpsc::unbounded_channel();
    let committing = tokio::spawn(run_committer(
        Arc::clone(&shared),
        committer,
        queued,
        max_batch,
    ));
    let mut reads = tokio::task::JoinSet::new();
    while let Some(first) = inbox.recv().await {
        while reads.try_join_next().is_some() {}
        let mut gets: HashMap<String, Vec<(Vec<u8>, Reply)>> = HashMap::new();
        let mut next = Some(first);
        while let Some((request, reply)) = next.take() {
            let shared = Arc::clone(&shared);
            match request {
                Request::Commit(batch) => drop(batches.send((batch, reply))),
                Request::Get { table, key } => gets.entry(table).or_default().push((key, reply)),
                Request::Scan(request) => {
                    reads.spawn(async move {
                        let rows = read::scan(&shared.readers, &shared.tables, &request).await;
                        shared.answer(reply, rows.map(Answer::Rows));
                    });
                }
                Request::Count { table } => {
                    reads.spawn(async move {
                        let count = read::count(&shared.readers, &shared.tables, &table).await;
                        shared.answer(reply, count.map(Answer::Count));
                    });
                }
            }
            next = inbox.try_recv().ok();
        }
        for (table, waiting) in gets {
            reads.spawn(answer_gets(Arc::clone(&shared), table, waiting));
        }
    }
    drop(batches);
    let _ = committing.await;
    while reads.join_next().await.is_some() {}
}

/// Answer the gets of `table` that arrived together: one statement for all of them.
async fn answer_gets(shared: Arc<Shared>, table: String, mut waiting: Vec<(Vec<u8>, Reply)>) {
    if waiting.len() == 1 {
        let (key, reply) = waiting.remove(0);
        let value = read::get(&shared.readers, &shared.tables, &table, &key).await;
        shared.answer(reply, value.map(Answer::Value));
        return;
    }
    let keys: Vec<&[u8]> = waiting.iter().map(|(key, _)| key.as_slice()).collect();
    let found = read::get_many(&shared.readers, &shared.tables, &table, &keys).await;
    for (key, reply) in waiting {
        let answer = match &found {
            Ok(values) => Ok(Answer::Value(values.get(&key).cloned())),
            Err(err) => Err(connection::same_error(err)),
        };
        shared.answer(reply, answer);
    }
}

/// Commits what queued while the last group was committing, up to `max_batch` batches at once.
async fn run_committer(
    shared: Arc<Shared>,
    pool: Pool,
    mut queued: mpsc::UnboundedReceiver<(Batch, Reply)>,
    max_batch: usize,
) {
    while let Some(first) = queued.recv().await {
        let mut group = vec![first];
        while group.len() < max_batch {
            match queued.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let (batches, replies): (Vec<Batch>, Vec<Reply>) = group.into_iter().unzip();
        let results = match pool.get().await {
            Ok(connection) => {
                let results = commit::commit_group(&connection, &shared.tables, &batches).await;
                let broken = |r: &Result<()>| {
                    matches!(r, Err(SpoolError::Storage(_) | SpoolError::Unavailable(_)))
                };
                if results.iter().any(broken) {
                    // Whatever failed may have left the session inside the transaction.
                    let _ = connection.client.batch_execute("ROLLBACK").await;
                }
                results
            }
            Err(err) => batches
                .iter()
                .map(|_| Err(connection::same_error(&err)))
                .collect(),
        };
        for (reply, result) in replies.into_iter().zip(results) {
            shared.answer(reply, result.map(|()| Answer::Committed));
        }
    }
}
