//! Python face of `postwire_core::mime` (placeholder: being written).

use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
