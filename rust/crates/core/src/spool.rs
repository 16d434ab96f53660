//! Durable spool (placeholder: being written).

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("spool map is full")]
    MapFull,
    #[error("key exists in {table}")]
    KeyExists { table: String, key: Vec<u8> },
    #[error("lease lost: {0}")]
    LeaseLost(String),
    #[error("spool: {0}")]
    Storage(String),
}
