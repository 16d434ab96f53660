//! Python face of `postwire_core::smtp_data`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `raw` without its dot-stuffing, and the length of its longest line (without CRLF).
#[pyfunction]
fn unstuff_data<'py>(py: Python<'py>, raw: &[u8]) -> (Bound<'py, PyBytes>, usize) {
    let (content, longest) = postwire_core::smtp_data::unstuff(raw);
    (PyBytes::new(py, &content), longest)
}

/// The DATA transfer of `body`: dot-stuffed, CRLF-terminated, then ".\r\n".
#[pyfunction]
fn stuff_data<'py>(py: Python<'py>, body: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &postwire_core::smtp_data::stuff(body))
}

/// (NUL octet found, bare LF found, bare CR found) in `message`.
#[pyfunction]
fn data_faults(message: &[u8]) -> (bool, bool, bool) {
    let found = postwire_core::smtp_data::faults(message);
    (found.nul, found.bare_line_feed, found.bare_carriage_return)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(unstuff_data, m)?)?;
    m.add_function(wrap_pyfunction!(stuff_data, m)?)?;
    m.add_function(wrap_pyfunction!(data_faults, m)?)
}
