//! `postwire._core`: thin PyO3 wrappers over `postwire_core`, one file per core module.
//!
//! Conversions of errors happen only in `errors.rs`. Heavy calls (RSA signing, LMDB commits) run
//! with the GIL released (`py.detach`).

mod dkim;
mod email_layout;
mod errors;
mod ids;
mod mime;
mod smtp_data;
mod spool;
mod table_pg;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    ids::register(m)?;
    mime::register(m)?;
    dkim::register(m)?;
    spool::register(m)?;
    table_pg::register(m)?;
    smtp_data::register(m)?;
    email_layout::register(m)?;
    Ok(())
}
