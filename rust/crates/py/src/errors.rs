//! The one place where core errors become Python exceptions.
//!
//! The exception classes live in `postwire/errors.py` (one tree for the whole project); they are
//! imported here rather than created, so Python code catches the same classes everywhere.

use postwire_core::dkim::DkimError;
use postwire_core::email_layout::EmailLayoutError;
use postwire_core::mime::MimeError;
use postwire_core::spool::SpoolError;
use pyo3::prelude::*;

use pyo3::types::PyBytes;

/// The classes of `postwire/errors.py`, under their Python names.
mod py {
    pyo3::import_exception!(postwire.errors, MessageError);
    pyo3::import_exception!(postwire.errors, HeaderInjectionError);
    pyo3::import_exception!(postwire.errors, DkimError);
    pyo3::import_exception!(postwire.errors, SpoolError);
    pyo3::import_exception!(postwire.errors, SpoolFullError);
    pyo3::import_exception!(postwire.errors, KeyExistsError);
    pyo3::import_exception!(postwire.errors, LeaseLostError);
    pyo3::import_exception!(postwire.errors, ConflictError);
    pyo3::import_exception!(postwire.errors, NoSuchMessageError);
    pyo3::import_exception!(postwire.errors, StoreUnavailableError);
}

pub fn mime_error(err: MimeError) -> PyErr {
    match err {
        MimeError::HeaderInjection(_) => py::HeaderInjectionError::new_err(err.to_string()),
        _ => py::MessageError::new_err(err.to_string()),
    }
}

pub fn email_layout_error(err: EmailLayoutError) -> PyErr {
    py::MessageError::new_err(err.to_string())
}

pub fn dkim_error(err: DkimError) -> PyErr {
    py::DkimError::new_err(err.to_string())
}

pub fn spool_error(err: SpoolError) -> PyErr {
    match &err {
        SpoolError::MapFull | SpoolError::IntakeFull { .. } | SpoolError::DiskFull(_) => {
            py::SpoolFullError::new_err(err.to_string())
        }
        SpoolError::KeyExists { table, key } => Python::attach(|py| {
            let key = PyBytes::new(py, key).unbind();
            py::KeyExistsError::new_err((err.to_string(), table.clone(), key))
        }),
        SpoolError::Conflict { table, key } => Python::attach(|py| {
            let key = PyBytes::new(py, key).unbind();
            py::ConflictError::new_err((err.to_string(), table.clone(), key))
        }),
        SpoolError::LeaseLost(_) => py::LeaseLostError::new_err(err.to_string()),
        SpoolError::NoSuchMessage(_) => py::NoSuchMessageError::new_err(err.to_string()),
        SpoolError::Unavailable(_) => py::StoreUnavailableError::new_err(err.to_string()),
        _ => py::SpoolError::new_err(err.to_string()),
    }
}
