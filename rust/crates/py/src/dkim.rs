//! Python face of `postwire_core::dkim`: key generation and a reusable signer.

use postwire_core::dkim::{self, KeyKind, Signer};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::dkim_error;

/// A fresh DKIM key pair: the private key to store and the TXT value to publish.
#[pyclass(frozen, module = "postwire._core", name = "DkimKey")]
struct DkimKey {
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    private_key_pem: String,
    #[pyo3(get)]
    dns_txt: String,
}

#[pymethods]
impl DkimKey {
    /// Leaves the private key out, so logging a key does not leak it.
    fn __repr__(&self) -> String {
        format!("DkimKey(kind={:?}, dns_txt={:?})", self.kind, self.dns_txt)
    }
}

/// Generates an RSA (default 2048 bits) or Ed25519 key; RSA generation runs without the GIL.
#[pyfunction]
#[pyo3(signature = (kind = "rsa", bits = None))]
fn generate_dkim_key(py: Python<'_>, kind: &str, bits: Option<usize>) -> PyResult<DkimKey> {
    let kind = KeyKind::parse(kind).map_err(dkim_error)?;
    let key = py
        .detach(|| dkim::generate_key(kind, bits))
        .map_err(dkim_error)?;
    Ok(DkimKey {
        kind: key.kind.name(),
        private_key_pem: key.private_key_pem,
        dns_txt: key.dns_txt,
    })
}

/// A private key bound to a domain and selector, parsed once and reused for every message.
#[pyclass(frozen, module = "postwire._core", name = "DkimSigner")]
struct DkimSigner {
    inner: Signer,
}

#[pymethods]
impl DkimSigner {
    #[new]
    fn new(private_key_pem: &str, domain: &str, selector: &str) -> PyResult<Self> {
        let inner = Signer::new(private_key_pem, domain, selector).map_err(dkim_error)?;
        Ok(DkimSigner { inner })
    }

    /// Returns the `DKIM-Signature: ...\r\n` header for `message`. `bytes` only (not
    /// `bytearray`): the buffer must stay unchanged while the GIL is released.
    #[pyo3(signature = (message, *, timestamp = None))]
    fn sign<'py>(
        &self,
        py: Python<'py>,
        message: &[u8],
        timestamp: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let header = py
            .detach(|| self.inner.sign(message, timestamp))
            .map_err(dkim_error)?;
        Ok(PyBytes::new(py, &header))
    }

    /// The `DKIM-Signature` headers of `messages`, in order, signed in one release of the GIL:
    /// a thread signing a batch retakes the GIL once, not once per message (each retake waits
    /// for the thread holding it to yield, up to the interpreter's switch interval).
    #[pyo3(signature = (messages, *, timestamp = None))]
    fn sign_many<'py>(
        &self,
        py: Python<'py>,
        messages: Vec<Bound<'py, PyBytes>>,
        timestamp: Option<u64>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let slices: Vec<&[u8]> = messages.iter().map(|m| m.as_bytes()).collect();
        let headers = py
            .detach(|| {
                slices
                    .iter()
                    .map(|message| self.inner.sign(message, timestamp))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(dkim_error)?;
        Ok(headers
            .iter()
            .map(|header| PyBytes::new(py, header))
            .collect())
    }

    #[getter]
    fn algorithm(&self) -> &'static str {
        self.inner.algorithm()
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().name()
    }

    #[getter]
    fn domain(&self) -> &str {
        self.inner.domain()
    }

    #[getter]
    fn selector(&self) -> &str {
        self.inner.selector()
    }

    #[getter]
    fn dns_txt(&self) -> &str {
        self.inner.dns_txt()
    }

    fn __repr__(&self) -> String {
        format!(
            "DkimSigner(algorithm={:?}, domain={:?}, selector={:?})",
            self.inner.algorithm(),
            self.inner.domain(),
            self.inner.selector()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DkimKey>()?;
    m.add_class::<DkimSigner>()?;
    m.add_function(wrap_pyfunction!(generate_dkim_key, m)?)
}
