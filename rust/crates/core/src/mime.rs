//! MIME assembly (placeholder: being written).

#[derive(Debug, thiserror::Error)]
pub enum MimeError {
    #[error("header injection refused: {0}")]
    HeaderInjection(String),
    #[error("invalid message: {0}")]
    Invalid(String),
}
