"""SMTP: submission (aiosmtpd adapter, pure policy) and the outbound client (sans-IO)."""
