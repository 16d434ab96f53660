//! DKIM key generation and signing (placeholder: being written).

#[derive(Debug, thiserror::Error)]
pub enum DkimError {
    #[error("{0}")]
    Key(String),
}
