"""The REST API, wire-compatible with Resend: one module per resource."""
