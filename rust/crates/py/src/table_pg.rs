//! Python face of `postwire_core::table_pg`: `PgTables`, the table store on PostgreSQL.

use postwire_core::table_pg::{self as core, Answer, AnswerResult, PgOptions, ScanRequest};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::errors::spool_error;
use crate::spool::WriteBatch;

/// Postwire's plain tables in a PostgreSQL database. Network work runs on a thread of its own;
/// `submit*` return a ticket at once and the answer comes in `take_completions`.
#[pyclass(frozen, module = "postwire._core")]
struct PgTables {
    store: core::PgTables,
}

fn answer_object(py: Python<'_>, answer: Answer) -> PyResult<Py<PyAny>> {
    Ok(match answer {
        Answer::Committed => py.None(),
        Answer::Value(value) => match value {
            Some(v) => PyBytes::new(py, &v).into_any().unbind(),
            None => py.None(),
        },
        Answer::Rows(rows) => rows_list(py, rows)?.into_any().unbind(),
        Answer::Count(count) => count.into_pyobject(py)?.into_any().unbind(),
    })
}

fn rows_list(py: Python<'_>, rows: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<Bound<'_, PyList>> {
    PyList::new(
        py,
        rows.into_iter()
            .map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v))),
    )
}

fn completion<'py>(
    py: Python<'py>,
    ticket: u64,
    result: AnswerResult,
) -> PyResult<(u64, Py<PyAny>, Py<PyAny>)> {
    Ok(match result {
        Ok(answer) => (ticket, answer_object(py, answer)?, py.None()),
        Err(err) => (
            ticket,
            py.None(),
            spool_error(err).into_value(py).into_any(),
        ),
    })
}

#[pymethods]
impl PgTables {
    #[new]
    #[pyo3(signature = (url, *, tables, schema = "postwire".to_string(), read_connections = 2, max_batch = 512))]
    fn new(
        py: Python<'_>,
        url: String,
        tables: Vec<String>,
        schema: String,
        read_connections: usize,
        max_batch: usize,
    ) -> PyResult<Self> {
        let options = PgOptions {
            url,
            schema,
            tables,
            read_connections,
            max_batch,
        };
        let store = py
            .detach(|| core::PgTables::open(&options))
            .map_err(spool_error)?;
        Ok(PgTables { store })
    }

    /// Queue the batch for group commit; returns its ticket at once.
    fn submit(&self, batch: &Bound<'_, WriteBatch>) -> PyResult<u64> {
        let batch = std::mem::take(&mut batch.borrow_mut().batch);
        self.store.submit(batch).map_err(spool_error)
    }

    /// Queue reads of several `(table, key)` at once; their tickets, in order.
    fn submit_gets(&self, requests: Vec<(String, Vec<u8>)>) -> PyResult<Vec<u64>> {
        self.store.submit_gets(requests).map_err(spool_error)
    }

    #[pyo3(signature = (table, *, prefix = b"".to_vec(), cursor = None, reverse = false, limit = 100))]
    fn submit_scan(
        &self,
        table: String,
        prefix: Vec<u8>,
        cursor: Option<Vec<u8>>,
        reverse: bool,
        limit: usize,
    ) -> PyResult<u64> {
        self.store
            .submit_scan(ScanRequest {
                table,
                prefix,
                cursor,
                reverse,
                limit,
            })
            .map_err(spool_error)
    }

    fn submit_count(&self, table: String) -> PyResult<u64> {
        self.store.submit_count(table).map_err(spool_error)
    }

    /// File descriptor that turns readable when completions wait in `take_completions`.
    fn wakeup_fd(&self) -> i32 {
        self.store.wakeup_fd()
    }

    /// Finished requests: `(ticket, answer, error)`, `error` None on success.
    fn take_completions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (ticket, result) in self.store.take_completions() {
            out.append(completion(py, ticket, result)?)?;
        }
        Ok(out)
    }

    /// Commit the batch, blocking (GIL released) until it is durable.
    fn commit(&self, py: Python<'_>, batch: &Bound<'_, WriteBatch>) -> PyResult<()> {
        let batch = std::mem::take(&mut batch.borrow_mut().batch);
        py.detach(|| self.store.commit(batch)).map_err(spool_error)
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        table: String,
        key: Vec<u8>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let value = py
            .detach(|| self.store.get(table, key))
            .map_err(spool_error)?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    #[pyo3(signature = (table, *, prefix = b"".to_vec(), cursor = None, reverse = false, limit = 100))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        table: String,
        prefix: Vec<u8>,
        cursor: Option<Vec<u8>>,
        reverse: bool,
        limit: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let request = ScanRequest {
            table,
            prefix,
            cursor,
            reverse,
            limit,
        };
        let rows = py
            .detach(|| self.store.scan(request))
            .map_err(spool_error)?;
        rows_list(py, rows)
    }

    fn count(&self, py: Python<'_>, table: String) -> PyResult<u64> {
        py.detach(|| self.store.count(table)).map_err(spool_error)
    }

    /// Finish what is queued and stop the store's thread (GIL released). Later calls raise.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.store.close());
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PgTables>()?;
    m.add("TABLE_SCHEMA_VERSION", core::SCHEMA_VERSION)?;
    Ok(())
}
