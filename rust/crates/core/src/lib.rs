//! Postwire's core: MIME assembly, DKIM signing, the durable LMDB spool, the table store's
//! PostgreSQL backend and email layout (MJML).
//!
//! Pure Rust with no Python in sight; `rust/crates/py` wraps it for `postwire._core`.

pub mod clock;
pub mod completion_queue;
pub mod disk_room;
pub mod dkim;
pub mod email_layout;
pub mod ids;
pub mod mime;
pub mod smtp_data;
pub mod spool;
pub mod table_pg;
#[cfg(test)]
mod test_dir;
pub mod transfer_encoding;
