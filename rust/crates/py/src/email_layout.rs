//! Python face of `postwire_core::email_layout`.

use pyo3::prelude::*;

use crate::errors::email_layout_error;

/// The email-safe HTML of an MJML document (no comments, no web fonts, no includes).
#[pyfunction]
fn mjml_to_html(py: Python<'_>, mjml: &str) -> PyResult<String> {
    let mjml = mjml.to_owned();
    py.detach(move || postwire_core::email_layout::mjml_to_html(&mjml))
        .map_err(email_layout_error)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mjml_to_html, m)?)
}
