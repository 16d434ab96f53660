//! Python face of `postwire_core::mime`: `Attachment` and `build_message`.

use postwire_core::mime::{self as core, Date, Mailbox, MessageSpec};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::mime_error;

/// Above this many octets of bodies and attachments the build runs with the GIL released;
/// below it, releasing and re-taking the GIL costs more than the build.
const DETACH_THRESHOLD: usize = 64 * 1024;

/// A file carried by a message; with a `content_id` it is an inline part of the html.
#[pyclass(frozen, module = "postwire._core", name = "Attachment")]
pub struct PyAttachment {
    // Kept as the caller's bytes object: immutable, so the build borrows it without a copy.
    content: Py<PyBytes>,
    filename: Option<String>,
    content_type: Option<String>,
    content_id: Option<String>,
}

#[pymethods]
impl PyAttachment {
    #[new]
    #[pyo3(signature = (content, filename=None, content_type=None, content_id=None))]
    fn new(
        content: Py<PyBytes>,
        filename: Option<String>,
        content_type: Option<String>,
        content_id: Option<String>,
    ) -> Self {
        Self {
            content,
            filename,
            content_type,
            content_id,
        }
    }

    #[getter]
    fn content(&self, py: Python<'_>) -> Py<PyBytes> {
        self.content.clone_ref(py)
    }

    #[getter]
    fn filename(&self) -> Option<&str> {
        self.filename.as_deref()
    }

    #[getter]
    fn content_type(&self) -> Option<&str> {
        self.content_type.as_deref()
    }

    #[getter]
    fn content_id(&self) -> Option<&str> {
        self.content_id.as_deref()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let repr = |value: &Option<String>| -> PyResult<String> {
            Ok(match value {
                Some(value) => PyString::new(py, value).repr()?.to_string(),
                None => "None".to_owned(),
            })
        };
        Ok(format!(
            "Attachment(<{} bytes>, filename={}, content_type={}, content_id={})",
            self.content.as_bytes(py).len(),
            repr(&self.filename)?,
            repr(&self.content_type)?,
            repr(&self.content_id)?
        ))
    }
}

type PyMailbox = (Option<String>, String);

fn mailboxes(list: &[PyMailbox]) -> Vec<Mailbox<'_>> {
    list.iter()
        .map(|(name, email)| Mailbox::new(name.as_deref(), email))
        .collect()
}

/// Builds an RFC 5322 message; see `_core.pyi` for the contract.
#[pyfunction]
#[pyo3(signature = (
    *,
    sender,
    to = Vec::new(),
    cc = Vec::new(),
    bcc = Vec::new(),
    reply_to = Vec::new(),
    subject = "",
    text = None,
    html = None,
    attachments = Vec::new(),
    headers = Vec::new(),
    message_id = None,
    date = None,
    utc_offset_minutes = 0,
    boundary_seed = None,
))]
// PyO3 cannot render `Vec::new()` defaults; spell the signature as the stub does.
#[pyo3(
    text_signature = "(*, sender, to=(), cc=(), bcc=(), reply_to=(), subject='', text=None, \
                      html=None, attachments=(), headers=(), message_id=None, date=None, \
                      utc_offset_minutes=0, boundary_seed=None)"
)]
#[allow(clippy::too_many_arguments)]
fn build_message<'py>(
    py: Python<'py>,
    sender: PyMailbox,
    to: Vec<PyMailbox>,
    cc: Vec<PyMailbox>,
    bcc: Vec<PyMailbox>,
    reply_to: Vec<PyMailbox>,
    subject: &str,
    text: Option<&str>,
    html: Option<&str>,
    attachments: Vec<Bound<'py, PyAttachment>>,
    headers: Vec<(String, String)>,
    message_id: Option<&str>,
    date: Option<i64>,
    utc_offset_minutes: i32,
    boundary_seed: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let attachments: Vec<core::Attachment<'_>> = attachments
        .iter()
        .map(|attachment| {
            let attachment = attachment.get();
            core::Attachment {
                content: attachment.content.as_bytes(py),
                filename: attachment.filename.as_deref(),
                content_type: attachment.content_type.as_deref(),
                content_id: attachment.content_id.as_deref(),
            }
        })
        .collect();
    let spec = MessageSpec {
        sender: Mailbox::new(sender.0.as_deref(), &sender.1),
        to: mailboxes(&to),
        cc: mailboxes(&cc),
        bcc: mailboxes(&bcc),
        reply_to: mailboxes(&reply_to),
        subject,
        text,
        html,
        headers: headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect(),
        message_id,
        date: match date {
            Some(unix) => Some(Date {
                unix,
                utc_offset_minutes,
            }),
            None => (utc_offset_minutes != 0).then(|| Date::now(utc_offset_minutes)),
        },
        boundary_seed,
        attachments,
    };
    let size = text.map_or(0, str::len)
        + html.map_or(0, str::len)
        + spec
            .attachments
            .iter()
            .map(|a| a.content.len())
            .sum::<usize>();
    let built = if size > DETACH_THRESHOLD {
        py.detach(|| core::build_message(&spec))
    } else {
        core::build_message(&spec)
    };
    built
        .map(|message| PyBytes::new(py, &message))
        .map_err(mime_error)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAttachment>()?;
    m.add_function(wrap_pyfunction!(build_message, m)?)
}
