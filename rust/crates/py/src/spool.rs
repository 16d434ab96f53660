//! Python face of `postwire_core::spool`: `Spool`, `WriteBatch`, `Leased`, `MessageState`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use postwire_core::spool as core;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::errors::spool_error;

/// Operations that commit together or not at all. Consumed when submitted.
#[pyclass(module = "postwire._core")]
#[derive(Default)]
pub(crate) struct WriteBatch {
    pub(crate) batch: core::Batch,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> Self {
        WriteBatch::default()
    }

    fn __len__(&self) -> usize {
        self.batch.ops.len()
    }

    /// A new batch with the same operations (a commit consumes the batch it is given).
    fn copy(&self) -> WriteBatch {
        WriteBatch {
            batch: self.batch.clone(),
        }
    }

    /// Move the operations into two new batches, `(shared, local)`: `local` takes the spool's
    /// own operations (messages, leases) and those on tables in `local_tables`; `shared` the
    /// other table operations. This batch is left empty.
    fn split(&mut self, local_tables: HashSet<String>) -> (WriteBatch, WriteBatch) {
        let mut shared = WriteBatch::default();
        let mut local = WriteBatch::default();
        for op in std::mem::take(&mut self.batch).ops {
            let table = match &op {
                core::Op::Put { table, .. }
                | core::Op::Insert { table, .. }
                | core::Op::Delete { table, .. }
                | core::Op::AddCounter { table, .. }
                | core::Op::Assert { table, .. } => Some(table),
                _ => None,
            };
            match table {
                Some(name) if !local_tables.contains(name) => shared.batch.push(op),
                _ => local.batch.push(op),
            };
        }
        (shared, local)
    }

    /// The table writes, in order, as `(kind, table, key, delta)`: kind `put`, `insert`,
    /// `delete` or `add_counter` (delta: the counter's; 0 otherwise). Assertions and the
    /// spool's own operations are left out. What an undo of the batch is built from.
    fn table_writes<'py>(
        &self,
        py: Python<'py>,
    ) -> Vec<(&'static str, String, Bound<'py, PyBytes>, i64)> {
        self.batch
            .ops
            .iter()
            .filter_map(|op| match op {
                core::Op::Put { table, key, .. } => Some(("put", table, key, 0)),
                core::Op::Insert { table, key, .. } => Some(("insert", table, key, 0)),
                core::Op::Delete { table, key } => Some(("delete", table, key, 0)),
                core::Op::AddCounter { table, key, delta } => {
                    Some(("add_counter", table, key, *delta))
                }
                _ => None,
            })
            .map(|(kind, table, key, delta)| (kind, table.clone(), PyBytes::new(py, key), delta))
            .collect()
    }

    /// Whether the batch brings messages in or takes them out without delivering them
    /// (`enqueue`, `remove`, or `reschedule` without a lease: a scheduled send moved): what a
    /// table write beside it must not outlive if this part is never committed.
    fn changes_the_queue(&self) -> bool {
        self.batch.ops.iter().any(|op| {
            matches!(
                op,
                core::Op::Enqueue { .. }
                    | core::Op::Remove { .. }
                    | core::Op::Reschedule { lease: None, .. }
            )
        })
    }

    fn put(&mut self, table: String, key: Vec<u8>, value: Vec<u8>) {
        self.batch.push(core::Op::Put { table, key, value });
    }

    fn insert(&mut self, table: String, key: Vec<u8>, value: Vec<u8>) {
        self.batch.push(core::Op::Insert { table, key, value });
    }

    fn delete(&mut self, table: String, key: Vec<u8>) {
        self.batch.push(core::Op::Delete { table, key });
    }

    #[pyo3(signature = (table, key, expected))]
    fn assert_value(&mut self, table: String, key: Vec<u8>, expected: Option<Vec<u8>>) {
        self.batch.push(core::Op::Assert {
            table,
            key,
            expected,
        });
    }

    fn add_counter(&mut self, table: String, key: Vec<u8>, delta: i64) {
        self.batch.push(core::Op::AddCounter { table, key, delta });
    }

    fn enqueue(&mut self, id: String, body: Vec<u8>, due_at_ms: u64, now_ms: u64) {
        self.batch.push(core::Op::Enqueue {
            id,
            body,
            due_at_ms,
            now_ms,
        });
    }

    #[pyo3(signature = (id, due_at_ms, now_ms, *, lease = None, count_attempt = false))]
    fn reschedule(
        &mut self,
        id: String,
        due_at_ms: u64,
        now_ms: u64,
        lease: Option<u64>,
        count_attempt: bool,
    ) {
        self.batch.push(core::Op::Reschedule {
            id,
            lease,
            due_at_ms,
            count_attempt,
            now_ms,
        });
    }

    fn ack(&mut self, id: String, lease: u64) {
        self.batch.push(core::Op::Ack { id, lease });
    }

    fn renew(&mut self, id: String, lease: u64, until_ms: u64) {
        self.batch.push(core::Op::Renew {
            id,
            lease,
            until_ms,
        });
    }

    fn remove(&mut self, id: String, now_ms: u64) {
        self.batch.push(core::Op::Remove { id, now_ms });
    }

    fn lease_due(&mut self, now_ms: u64, limit: usize, lease_ms: u64) {
        self.batch.push(core::Op::LeaseDue {
            now_ms,
            limit,
            lease_ms,
        });
    }

    fn release_leases(&mut self, now_ms: u64) {
        self.batch.push(core::Op::ReleaseLeases { now_ms });
    }
}

/// A message handed to a worker; ack or reschedule it with its `lease`.
#[pyclass(frozen, get_all, module = "postwire._core")]
struct Leased {
    id: String,
    lease: u64,
    lease_expires_at_ms: u64,
    attempts: u32,
    deliveries: u32,
    enqueued_at_ms: u64,
}

#[pymethods]
impl Leased {
    fn __repr__(&self) -> String {
        format!(
            "Leased(id={:?}, lease={}, lease_expires_at_ms={}, attempts={}, deliveries={})",
            self.id, self.lease, self.lease_expires_at_ms, self.attempts, self.deliveries
        )
    }
}

impl From<core::Leased> for Leased {
    fn from(l: core::Leased) -> Self {
        Leased {
            id: l.id,
            lease: l.lease,
            lease_expires_at_ms: l.lease_expires_at_ms,
            attempts: l.attempts,
            deliveries: l.deliveries,
            enqueued_at_ms: l.enqueued_at_ms,
        }
    }
}

/// Delivery state of one spooled message.
#[pyclass(frozen, get_all, module = "postwire._core")]
struct MessageState {
    due_at_ms: u64,
    lease: u64,
    attempts: u32,
    deliveries: u32,
    enqueued_at_ms: u64,
    leased_at_ms: u64,
}

fn leased_list(py: Python<'_>, leased: Vec<core::Leased>) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, leased.into_iter().map(Leased::from))
}

/// The durable spool (LMDB). Reads run on the calling thread; writes are group-committed by a
/// thread of its own, with the GIL released.
#[pyclass(frozen, module = "postwire._core")]
struct Spool {
    spool: core::Spool,
}

#[pymethods]
impl Spool {
    #[new]
    #[pyo3(signature = (path, *, tables, map_size = 1 << 30, commit_window_us = 1000, max_batch = 512, reserve = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        tables: Vec<String>,
        map_size: usize,
        commit_window_us: u64,
        max_batch: usize,
        reserve: Option<usize>,
    ) -> PyResult<Self> {
        let options = core::SpoolOptions {
            map_size,
            commit_window: Duration::from_micros(commit_window_us),
            max_batch,
            tables,
            reserve,
            disk_reserve: None,
        };
        let spool = py
            .detach(|| core::Spool::open(&path, &options))
            .map_err(spool_error)?;
        Ok(Spool { spool })
    }

    /// Queue the batch for group commit; returns its ticket at once.
    fn submit(&self, batch: &Bound<'_, WriteBatch>) -> PyResult<u64> {
        let batch = std::mem::take(&mut batch.borrow_mut().batch);
        self.spool.submit(batch).map_err(spool_error)
    }

    /// Commit the batch and block (GIL released) until it is durable.
    fn commit<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, WriteBatch>,
    ) -> PyResult<Bound<'py, PyList>> {
        let batch = std::mem::take(&mut batch.borrow_mut().batch);
        let leased = py
            .detach(|| self.spool.commit(batch))
            .map_err(spool_error)?;
        leased_list(py, leased)
    }

    /// File descriptor that turns readable when completions wait in `take_completions`.
    fn wakeup_fd(&self) -> i32 {
        self.spool.wakeup_fd()
    }

    /// Finished submitted batches: `(ticket, leased, error)` with `error` None on success.
    fn take_completions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for completion in self.spool.take_completions() {
            let item = match completion.result {
                Ok(leased) => (completion.ticket, leased_list(py, leased)?, py.None()),
                Err(err) => (
                    completion.ticket,
                    PyList::empty(py),
                    spool_error(err).into_value(py).into_any(),
                ),
            };
            out.append(item)?;
        }
        Ok(out)
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        key: &[u8],
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let value = self.spool.get(table, key).map_err(spool_error)?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    #[pyo3(signature = (table, *, prefix = b"".to_vec(), cursor = None, reverse = false, limit = 100))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        prefix: Vec<u8>,
        cursor: Option<Vec<u8>>,
        reverse: bool,
        limit: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let rows = self
            .spool
            .scan(table, &prefix, cursor.as_deref(), reverse, limit)
            .map_err(spool_error)?;
        PyList::new(
            py,
            rows.into_iter()
                .map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v))),
        )
    }

    fn count(&self, table: &str) -> PyResult<u64> {
        self.spool.count(table).map_err(spool_error)
    }

    fn message_body<'py>(
        &self,
        py: Python<'py>,
        id: &str,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let body = self.spool.message_body(id).map_err(spool_error)?;
        Ok(body.map(|b| PyBytes::new(py, &b)))
    }

    fn message_state(&self, id: &str) -> PyResult<Option<MessageState>> {
        let state = self.spool.message_state(id).map_err(spool_error)?;
        Ok(state.map(|s| MessageState {
            due_at_ms: s.due_at_ms,
            lease: s.lease,
            attempts: s.attempts,
            deliveries: s.deliveries,
            enqueued_at_ms: s.enqueued_at_ms,
            leased_at_ms: s.leased_at_ms,
        }))
    }

    fn message_count(&self) -> PyResult<u64> {
        self.spool.message_count().map_err(spool_error)
    }

    fn next_due_at(&self) -> PyResult<Option<u64>> {
        self.spool.next_due_at().map_err(spool_error)
    }

    /// Write a consistent, compacted copy of the spool to the file `path` (GIL released).
    fn copy_to(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.spool.copy_to(&path)).map_err(spool_error)
    }

    /// `(bytes in use, map size)`.
    fn usage(&self) -> PyResult<(u64, u64)> {
        self.spool.usage().map_err(spool_error)
    }

    /// Commit what is queued and stop the committer (GIL released). Later writes raise.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.spool.close());
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Spool>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<Leased>()?;
    m.add_class::<MessageState>()?;
    Ok(())
}
