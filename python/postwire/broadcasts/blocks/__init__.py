"""The broadcast editor's block documents: their JSON format, validation, email-safe rendering
(MJML through the Rust core), the generated text part and the checks before sending."""
