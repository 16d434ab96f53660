"""The accept/reject rules of SMTP submission, as pure functions.

Each `on_<command>` gets the facts of the session it needs and returns the SMTP reply that
refuses the command, or None to let it through. `submission.py` (the aiosmtpd adapter) calls
them and turns their replies into text with `format_reply`; nothing here does I/O, so the
rules are table-tested without sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from postwire.errors import ApiError

# (code, enhanced status code, text): `550 5.7.1 relaying denied`.
Reply = tuple[int, str, str]

AUTH_USERNAME = "postwire"
# RFC 5321 4.5.3.1.8 requires accepting at least 100; Resend's REST API caps `to` at 50, and
# SMTP mail must not reach more recipients than API mail can.
MAX_RECIPIENTS = 50

MUST_STARTTLS: Reply = (530, "5.7.0", "Must issue a STARTTLS command first")
AUTH_INVALID: Reply = (535, "5.7.8", "Authentication credentials invalid")
RELAYING_DENIED: Reply = (550, "5.7.1", "relaying denied")
# 452 (not 550 5.5.3): RFC 5321 4.5.3.1.10 says a client that gets 452 for too many
# recipients sends the rest in a later transaction, so nobody is lost.
TOO_MANY_RECIPIENTS: Reply = (452, "4.5.3", f"Too many recipients (at most {MAX_RECIPIENTS})")
MESSAGE_TOO_BIG: Reply = (552, "5.3.4", "Message size exceeds the fixed maximum message size")
LINE_TOO_LONG: Reply = (500, "5.5.2", "Line too long (at most 1000 octets, RFC 5321 4.5.3.1.6)")
COMMAND_TOO_LONG: Reply = (500, "5.5.2", "Command line too long")
NUL_IN_MESSAGE: Reply = (554, "5.6.0", "Message contains NUL bytes")


def format_reply(reply: Reply) -> str:
    code, enhanced, text = reply
    return f"{code} {enhanced} {text}"


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What the rules know about one SMTP session."""

    authenticated: bool  # AUTH succeeded with an API key
    trusted_peer: bool  # the client's address is in smtp.trusted_networks


def on_auth(username: str, key_found: bool) -> Reply | None:
    """The username is literally `postwire`; the password must be a live API key."""
    if username != AUTH_USERNAME or not key_found:
        return AUTH_INVALID
    return None


def may_relay(session: SessionFacts) -> bool:
    return session.authenticated or session.trusted_peer


def on_mail(session: SessionFacts) -> Reply | None:
    """MAIL is always allowed once TLS is up (aiosmtpd enforces TLS first): an unauthenticated
    client may still write to Postwire's own addresses, which RCPT decides."""
    return None


def on_rcpt(session: SessionFacts, recipients_so_far: int, inbound_address: bool) -> Reply | None:
    """`inbound_address`: the recipient is one of Postwire's own return-path or complaint
    addresses, which anyone may write to. Everything else needs AUTH or a trusted network."""
    if not inbound_address and not may_relay(session):
        return RELAYING_DENIED
    if recipients_so_far >= MAX_RECIPIENTS:
        return TOO_MANY_RECIPIENTS
    return None


def on_data(message: bytes, max_message_size: int) -> Reply | None:
    """Checks of the received content before it goes to the accept path. aiosmtpd already
    refuses too long lines and too much data while reading; this repeats the size rule for
    content it let through (its count excludes the dot-stuffing it removes)."""
    if len(message) > max_message_size:
        return MESSAGE_TOO_BIG
    if b"\x00" in message:
        return NUL_IN_MESSAGE
    return None


def accepted(email_id: str) -> Reply:
    return (250, "2.0.0", f"OK queued as {email_id}")


def reply_for_refusal(error: ApiError) -> Reply:
    """The one translation of the accept path's errors into SMTP replies."""
    if error.status == 403:  # the From domain is not verified, or not the key's domain
        return (550, "5.7.1", error.message)
    if error.status == 409 and error.name == "concurrent_idempotent_requests":
        return (451, "4.7.0", error.message)
    if error.status == 409:  # the idempotency key was used with another message
        return (550, "5.7.0", error.message)
    if error.status in (429, 503):
        return (451, "4.3.0", error.message)
    if 400 <= error.status < 500:
        return (550, "5.6.0", error.message)
    return (451, "4.3.0", error.message)
