//! Python face of `postwire_core::ids`.

use pyo3::prelude::*;

/// A fresh random UUID v4 string.
#[pyfunction]
fn new_id() -> String {
    postwire_core::ids::new_id()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(new_id, m)?)
}
