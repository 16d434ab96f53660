"""The accept/reject rules of SMTP submission, as pure functions.

Each `on_<command>` gets the facts of the session it needs and returns the SMTP reply that
refuses the command, or None to let it through. `submission.py` (the aiosmtpd adapter) calls
them and turns their replies into text with `format_reply`; nothing here does I/O, so the
rules are table-tested without sockets.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from postwire import _core
from postwire.compose.addresses import recipient_problem
from postwire.errors import ApiError
from postwire.store.accounts import token_lookup

# (code, enhanced status code, text): `550 5.7.1 relaying denied`.
Reply = tuple[int, str, str]

AUTH_USERNAME = "postwire"
# RFC 5321 4.5.3.1.8 requires accepting at least 100; Resend's REST API caps `to` at 50, and
# SMTP mail must not reach more recipients than API mail can.
MAX_RECIPIENTS = 50

MUST_STARTTLS: Reply = (530, "5.7.0", "Must issue a STARTTLS command first")
AUTH_INVALID: Reply = (535, "5.7.8", "Authentication credentials invalid")
AUTH_TOO_MANY_FAILURES: Reply = (
    454,
    "4.7.0",
    "Too many failed authentication attempts from this address, try again in a minute",
)
AUTH_CREDENTIAL_LOCKED: Reply = (
    454,
    "4.7.0",
    "Too many failed authentication attempts with this key from this address, "
    "try again in a minute",
)
# Failed AUTH attempts one source may make per minute, across all credentials, as a multiple
# of `smtp.max_auth_failures` (the allowance of one credential from one source): high enough
# that clients behind one NAT do not lock each other out, low enough to stop spraying keys.
AUTH_SOURCE_CEILING_FACTOR = 10
RELAYING_DENIED: Reply = (550, "5.7.1", "relaying denied")
# 452 (not 550 5.5.3): RFC 5321 4.5.3.1.10 says a client that gets 452 for too many
# recipients sends the rest in a later transaction, so nobody is lost.
TOO_MANY_RECIPIENTS: Reply = (452, "4.5.3", f"Too many recipients (at most {MAX_RECIPIENTS})")
MESSAGE_TOO_BIG: Reply = (552, "5.3.4", "Message size exceeds the fixed maximum message size")
LINE_TOO_LONG: Reply = (
    500,
    "5.5.2",
    "Line too long (at most 1000 octets with its CRLF, RFC 5321 4.5.3.1.6; a bare LF ends no line)",
)
COMMAND_TOO_LONG: Reply = (500, "5.5.2", "Command line too long")
NUL_IN_MESSAGE: Reply = (554, "5.6.0", "Message contains NUL bytes")
# Refused, not repaired: reading a bare LF or CR as a line end is what SMTP smuggling exploits
# (a "\n.\n" or "\r.\r" that one server takes for the end of data and the next does not), and
# current MTAs refuse it too (Postfix's smtpd_forbid_bare_newline).
BARE_LF: Reply = (550, "5.5.2", "Message contains a bare LF: lines end with CRLF (RFC 5321 2.3.8)")
BARE_CR: Reply = (550, "5.5.2", "Message contains a bare CR: lines end with CRLF (RFC 5321 2.3.8)")
# 452 4.5.3 again: the client sends the other recipients in a transaction of their own.
MIXED_RECIPIENTS: Reply = (
    452,
    "4.5.3",
    "Mail to Postwire's bounce and complaint addresses needs a transaction of its own",
)
NOT_A_REPORT: Reply = (
    550,
    "5.6.0",
    "Only delivery status notifications (RFC 3464) and feedback reports (RFC 5965) "
    "are accepted at this address",
)
REPORT_RECEIVED: Reply = (250, "2.0.0", "OK report received")
# A return path of ours in shape, but with a tag Postwire did not make, or one that has expired:
# nothing sent to it is applied.
UNKNOWN_RETURN_PATH: Reply = (550, "5.1.1", "No such bounce address")
# An unsubscribe address of ours in shape, whose token Postwire did not make.
UNKNOWN_UNSUBSCRIBE_ADDRESS: Reply = (550, "5.1.1", "No such unsubscribe address")
UNSUBSCRIBED: Reply = (250, "2.0.0", "OK unsubscribed")
INSUFFICIENT_STORAGE: Reply = (452, "4.3.1", "Insufficient system storage, try again later")
# The table store (PostgreSQL) cannot be reached: nothing of the command was kept.
DATABASE_UNREACHABLE: Reply = (451, "4.3.0", "The database is unreachable, try again later")
# Past `smtp.max_connections_per_client`: said in place of the greeting, then closed.
TOO_MANY_CONNECTIONS: Reply = (
    421,
    "4.7.0",
    "Too many connections from your address, try again later",
)


def format_reply(reply: Reply) -> str:
    code, enhanced, text = reply
    return f"{code} {enhanced} {text}"


# For the protocol errors aiosmtpd replies without an enhanced status code (RFC 3463).
_ENHANCED_BY_CODE: Final = {
    421: "4.3.2",  # service not available
    450: "4.2.0",
    451: "4.3.0",
    452: "4.3.1",
    454: "4.7.0",  # TLS not available now (RFC 3207)
    500: "5.5.2",  # syntax error
    501: "5.5.4",  # invalid arguments
    502: "5.5.1",  # command not implemented
    503: "5.5.1",  # bad sequence of commands
    504: "5.5.4",
    530: "5.7.0",
    550: "5.0.0",
    552: "5.3.4",
    553: "5.1.3",
    554: "5.0.0",
}
_REPLY_LINE: Final = re.compile(r"([45]\d\d)([ -])(?!\d\.\d{1,3}\.\d{1,3}(?: |$))")


def with_enhanced_code(line: str) -> str:
    """`line` with an enhanced status code after a 4xx or 5xx reply code that lacks one, so
    that clients can classify every refusal without reading its text."""
    match = _REPLY_LINE.match(line)
    if match is None:
        return line
    code = int(match[1])
    enhanced = _ENHANCED_BY_CODE.get(code, f"{code // 100}.0.0")
    return f"{match[1]}{match[2]}{enhanced} {line[match.end() :]}".rstrip()


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What the rules know about one SMTP session."""

    authenticated: bool  # AUTH succeeded with an API key
    trusted_peer: bool  # the client's address is in smtp.trusted_networks


def auth_credential(username: str, password: str) -> str:
    """What names the credential of an AUTH attempt without keeping it: a digest of the
    username and of the key the password names (its lookup part, which is no secret), so
    every guess at one key's secret counts against that key."""
    named = token_lookup(password) or password
    return hashlib.sha256(f"{username}\0{named}".encode()).hexdigest()[:32]


def on_auth_attempt(
    source_failures: int, credential_failures: int, max_failures: int
) -> Reply | None:
    """A credential that failed `max_failures` times this minute from one source is refused
    there before it is looked at again, so guessing a key gains nothing; any source that
    failed `AUTH_SOURCE_CEILING_FACTOR` times as often is refused whatever it presents.
    Another key from the same source (a client behind the same NAT) still gets in until
    then. `max_failures` 0: no limit."""
    if max_failures <= 0:
        return None
    if source_failures >= max_failures * AUTH_SOURCE_CEILING_FACTOR:
        return AUTH_TOO_MANY_FAILURES
    if credential_failures >= max_failures:
        return AUTH_CREDENTIAL_LOCKED
    return None


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


def is_inbound(session: SessionFacts, inbound_address: bool) -> bool:
    """Whether mail to a recipient is a report for Postwire itself rather than mail to send.

    `inbound_address`: the recipient is one of Postwire's own return-path or complaint
    addresses, which anyone may write to. From an authenticated client such an address is an
    ordinary recipient: it is sent like any other mail.
    """
    return inbound_address and not session.authenticated


def on_rcpt_address(address: str) -> Reply | None:
    """A recipient must be an address the REST API would send to (`recipient_problem`): not
    the null path, an address literal, a single-label or internal name, nor anything else
    that is no address, so nobody can point Postwire at a host of its own network."""
    problem = recipient_problem(address)
    return None if problem is None else (501, "5.1.3", problem)


def on_rcpt(
    session: SessionFacts,
    recipients_so_far: int,
    inbound: bool,
    transaction_inbound: bool | None,
) -> Reply | None:
    """`inbound`: see `is_inbound`; anything else needs AUTH or a trusted network.
    `transaction_inbound`: whether the recipients accepted so far are inbound (None: none yet);
    a report and mail to send never share a transaction, as they go different ways."""
    if not inbound and not may_relay(session):
        return RELAYING_DENIED
    if transaction_inbound is not None and inbound != transaction_inbound:
        return MIXED_RECIPIENTS
    if recipients_so_far >= MAX_RECIPIENTS:
        return TOO_MANY_RECIPIENTS
    return None


def on_data(message: bytes, max_message_size: int) -> Reply | None:
    """Checks of the received content before it goes to the accept path. The DATA reader
    (`submission.read_data`) already refuses too long lines and too much data as sent; the
    size rule stands here too, so that the rules of a message are all in one place."""
    if len(message) > max_message_size:
        return MESSAGE_TOO_BIG
    nul, bare_line_feed, bare_carriage_return = _core.data_faults(message)
    if nul:
        return NUL_IN_MESSAGE
    if bare_line_feed:
        return BARE_LF
    if bare_carriage_return:
        return BARE_CR
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
