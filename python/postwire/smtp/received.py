"""The `Received:` trace field that SMTP submission puts on top of every message it accepts
(RFC 5321 §4.4), in the form Postfix writes and spam filters parse:

    Received: from client.example ([192.0.2.7])
            (using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384 (256 bits))
            by mx.example.com (Postwire) with ESMTPSA id 0192f0a4-...;
            Tue, 07 Oct 2025 12:00:00 +0000

The client's HELO is its own text: it is written only when it is a domain or an address
literal, and otherwise as a comment with every octet that could end the comment or the field
replaced. Nothing of the client's credentials is written, nor the recipients (a Bcc recipient
would show in everyone's copy).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from datetime import UTC, datetime

# RFC 5321 §4.1.2 Domain: labels of letters, digits and inner hyphens (a final dot tolerated).
_DOMAIN = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?"
)
_LITERAL = re.compile(r"\[(?:IPv6:)?([0-9A-Fa-f:.]+)\]")
# Octets a comment may carry as they are: printable ASCII but its delimiters and escape.
_UNSAFE_IN_COMMENT = re.compile(r"[^\x21-\x27\x2a-\x5b\x5d-\x7e]")
_MAX_HELO_SHOWN = 64


@dataclass(frozen=True, slots=True)
class SubmissionTrace:
    """What one SMTP session tells of where a message came from."""

    helo: str | None  # the client's HELO or EHLO argument, as sent
    client_address: str  # its IP address
    server_name: str  # ours, as our greeting names it
    extended: bool  # EHLO rather than HELO
    authenticated: bool
    tls_version: str | None  # "TLSv1.3"; None without TLS
    tls_cipher: str | None
    tls_bits: int | None


def address_literal(address: str) -> str:
    """`[192.0.2.7]` or `[IPv6:2001:db8::1]` (RFC 5321 §4.1.3)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return "[" + _UNSAFE_IN_COMMENT.sub("?", address) + "]"
    if isinstance(parsed, ipaddress.IPv6Address):
        return f"[IPv6:{parsed.compressed}]"
    return f"[{parsed}]"


def _is_domain_or_literal(helo: str) -> bool:
    if len(helo) <= 255 and _DOMAIN.fullmatch(helo):
        return True
    literal = _LITERAL.fullmatch(helo)
    if literal is None:
        return False
    try:
        ipaddress.ip_address(literal.group(1))
    except ValueError:
        return False
    return True


def protocol(trace: SubmissionTrace) -> str:
    """The `with` keyword (RFC 3848, RFC 8314 §7.3): ESMTP, then S for TLS and A for AUTH."""
    if not trace.extended:
        return "SMTP"
    return "ESMTP" + ("S" if trace.tls_version else "") + ("A" if trace.authenticated else "")


def received_field(trace: SubmissionTrace, email_id: str, now: datetime) -> bytes:
    """The folded `Received:` field, CRLF between its lines and none after it."""
    head = _received_head(trace)
    return f"{head} id {email_id};\r\n\t{rfc5322_date(now)}".encode("ascii", "replace")


@functools.lru_cache(maxsize=1024)
def _received_head(trace: SubmissionTrace) -> str:
    """The field up to its `id`: the same for every message of a session, so made once."""
    client = address_literal(trace.client_address)
    helo = trace.helo or ""
    if _is_domain_or_literal(helo):
        lines = [f"Received: from {helo} ({client})"]
    elif helo:  # not a name: the address stands in, the text goes in a comment
        shown = _UNSAFE_IN_COMMENT.sub("?", helo[:_MAX_HELO_SHOWN])
        lines = [f"Received: from {client} (helo={shown})"]
    else:
        lines = [f"Received: from {client}"]
    if trace.tls_version:
        bits = f" ({trace.tls_bits} bits)" if trace.tls_bits else ""
        lines.append(f"(using {trace.tls_version} with cipher {trace.tls_cipher}{bits})")
    lines.append(f"by {trace.server_name} (Postwire) with {protocol(trace)}")
    return "\r\n\t".join(lines)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def rfc5322_date(moment: datetime) -> str:
    """`Wed, 25 Nov 2026 18:20:07 +0000` (RFC 5322 §3.3) for an aware moment, in UTC: what
    `email.utils.format_datetime` writes, without its generality (it was 1% of submission)."""
    utc = moment.astimezone(UTC)
    return (
        f"{_DAYS[utc.weekday()]}, {utc.day:02d} {_MONTHS[utc.month - 1]} {utc.year:04d} "
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d} +0000"
    )
