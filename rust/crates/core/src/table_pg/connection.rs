//! Connections to PostgreSQL: a small pool that reconnects by itself, a statement cache per
//! connection, and the translation of driver errors into [`SpoolError`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::spool::SpoolError;

/// How long a connection attempt may take before the store is reported unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One session with the server and the statements prepared on it.
pub(super) struct Connection {
    pub(super) client: Client,
    statements: Mutex<HashMap<String, Statement>>,
}

impl Connection {
    /// The prepared statement for `sql`, prepared on first use. Concurrent first uses each
    /// prepare it (pipelined on the connection); the last one is kept.
    pub(super) async fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(statement) = self.cached(sql) {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await?;
        if let Ok(mut statements) = self.statements.lock() {
            statements.insert(sql.to_string(), statement.clone());
        }
        Ok(statement)
    }

    fn cached(&self, sql: &str) -> Option<Statement> {
        self.statements.lock().ok()?.get(sql).cloned()
    }
}

/// A fixed number of connection slots, each filled on demand and refilled when its session
/// was lost: a server that comes back is used again without reopening the store.
pub(super) struct Pool {
    config: Config,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Connection>>>>,
    next: AtomicUsize,
}

impl Pool {
    pub(super) fn new(url: &str, size: usize) -> Result<Pool, SpoolError> {
        let mut config: Config = url
            .parse()
            .map_err(|e| SpoolError::Invalid(format!("bad PostgreSQL URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("postwire");
        }
        Ok(Pool {
            config,
            slots: (0..size.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        })
    }

    /// A live connection, round robin over the slots (each pipelines its callers' statements).
    pub(super) async fn get(&self) -> Result<Arc<Connection>, SpoolError> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[index].lock().await;
        if let Some(connection) = slot.as_ref() {
            if !connection.client.is_closed() {
                return Ok(Arc::clone(connection));
            }
        }
        *slot = None;
        let connection = Arc::new(self.connect().await?);
        *slot = Some(Arc::clone(&connection));
        Ok(connection)
    }

    async fn connect(&self) -> Result<Connection, SpoolError> {
        // The one place a session is made: TLS, when it comes, is chosen here.
        let (client, session) = self.config.connect(NoTls).await.map_err(store_error)?;
        tokio::spawn(async move {
            // Ends when the server goes or the client is dropped; callers see a closed client.
            let _ = session.await;
        });
        Ok(Connection {
            client,
            statements: Mutex::new(HashMap::new()),
        })
    }
}

/// Whether the error is the server's answer that this statement may succeed if run again
/// (another transaction won a lock in a cycle, or a serialization check).
pub(super) fn is_retryable(err: &tokio_postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

/// Whether the error says the session is gone (or the server is going): the store is unreachable.
pub(super) fn is_unreachable(err: &tokio_postgres::Error) -> bool {
    match err.code() {
        None => err.as_db_error().is_none(),
        Some(code) => {
            code.code().starts_with("08")
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || *code == SqlState::TOO_MANY_CONNECTIONS
        }
    }
}

/// A counter's stored value was not an integer (or the sum left the 64-bit range).
fn is_bad_counter(err: &tokio_postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(code) if *code == SqlState::INVALID_TEXT_REPRESENTATION
            || *code == SqlState::NUMERIC_VALUE_OUT_OF_RANGE
            || *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE
    )
}

/// The one translation of driver errors.
pub(super) fn store_error(err: tokio_postgres::Error) -> SpoolError {
    if is_unreachable(&err) {
        return SpoolError::Unavailable(describe(&err));
    }
    if is_bad_counter(&err) {
        return SpoolError::Invalid("a counter holds something other than an integer".into());
    }
    SpoolError::Storage(format!("PostgreSQL: {}", describe(&err)))
}

fn describe(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            // The driver's own text ("error connecting to server") hides the reason in its source.
            let mut text = err.to_string();
            if let Some(source) = std::error::Error::source(err) {
                text = format!("{text}: {source}");
            }
            text
        }
    }
}

/// A second copy of an error that several waiters share (a lost connection fails a whole group).
pub(super) fn same_error(err: &SpoolError) -> SpoolError {
    match err {
        SpoolError::Unavailable(text) => SpoolError::Unavailable(text.clone()),
        SpoolError::Invalid(text) => SpoolError::Invalid(text.clone()),
        SpoolError::Closed => SpoolError::Closed,
        SpoolError::UnknownTable(table) => SpoolError::UnknownTable(table.clone()),
        other => SpoolError::Storage(other.to_string()),
    }
}
